;;; agent-lsp-diagnostics.el --- Answers agentLsp/diagnostics from Flymake -*- lexical-binding: t; -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; The server asks `agentLsp/diagnostics {uris?, afterVersion?}' for what
;; the editor shows (the model's `diagnostics' tool, and the problems an
;; applied edit left).  The answer is Flymake's diagnostics of the buffers
;; visiting those files, from every backend (Eglot's servers, linters),
;; as LSP Diagnostics in the agent-lsp server's position encoding.  With
;; `afterVersion', the answer waits (at most 2 s, CONTRACT Decision 15)
;; until the buffer has reached that version and Flymake has checked it
;; since its last change.  Load `agent-lsp', not this file.

;;; Code:

(require 'flymake)
(require 'agent-lsp-rpc)

(defvar flymake--recent-changes)        ; Flymake 1.x internal, Emacs >= 28
;; Eglot keeps a managed buffer's document version here, with no public
;; accessor (see the list in agent-lsp-base.el)
(defvar eglot--versioned-identifier)
(declare-function flymake--lookup-type-property "flymake")

(defconst agent-lsp--diagnostics-wait 2.0
  "Seconds an `afterVersion' request may wait for Flymake (Decision 15).")

(defun agent-lsp--position-encoding (server)
  "The position encoding SERVER chose (\"utf-16\" unless it said otherwise)."
  (or (plist-get (ignore-errors (eglot--capabilities server)) :positionEncoding)
      "utf-16"))

(defun agent-lsp--lsp-position (pos encoding)
  "The LSP position of POS, its column counted in ENCODING's code units."
  (save-excursion
    (save-restriction
      (widen)
      (goto-char pos)
      (let ((before (buffer-substring-no-properties (line-beginning-position)
                                                    pos)))
        (list :line (1- (line-number-at-pos pos t))
              :character
              (pcase encoding
                ("utf-32" (length before))
                ("utf-8" (length (encode-coding-string before 'utf-8 t)))
                ;; UTF-16: characters outside the BMP take two code units
                (_ (+ (length before)
                      (cl-count-if (lambda (c) (> c #xFFFF)) before)))))))))

(defun agent-lsp--severity (type)
  "The LSP severity (1 error .. 4 hint) of the Flymake diagnostic TYPE."
  (let ((level (if (fboundp 'flymake--lookup-type-property)
                   (flymake--lookup-type-property type 'severity
                                                  (warning-numeric-level :error))
                 (warning-numeric-level :error))))
    (cond ((>= level (warning-numeric-level :error)) 1)
          ((>= level (warning-numeric-level :warning)) 2)
          (t 3))))

(defun agent-lsp--lsp-diagnostic (diag encoding)
  "Flymake's DIAG as an LSP Diagnostic, positions in ENCODING."
  (let* ((data (flymake-diagnostic-data diag))
         ;; Eglot keeps the language server's own diagnostic: its source and code
         (original (and (consp data) (consp (car data))
                        (alist-get 'eglot-lsp-diag data)))
         (backend (flymake-diagnostic-backend diag))
         (source (or (plist-get original :source)
                     (and backend (symbolp backend)
                          (replace-regexp-in-string
                           "-?flymake-?\\|-backend\\'" "" (symbol-name backend)))))
         (code (plist-get original :code)))
    (append
     (list :range (list :start (agent-lsp--lsp-position
                                (flymake-diagnostic-beg diag) encoding)
                        :end (agent-lsp--lsp-position
                              (flymake-diagnostic-end diag) encoding))
           :severity (or (plist-get original :severity)
                         (agent-lsp--severity (flymake-diagnostic-type diag)))
           :message (flymake-diagnostic-text diag))
     (and source (not (string-empty-p source)) (list :source source))
     (and code (list :code code)))))

(defun agent-lsp--diagnostics-of (buffer encoding)
  "BUFFER's Flymake diagnostics as a vector of LSP Diagnostics."
  (with-current-buffer buffer
    (if (not (bound-and-true-p flymake-mode)) []
      (vconcat (mapcar (lambda (d) (agent-lsp--lsp-diagnostic d encoding))
                       (flymake-diagnostics))))))

(defvar-local agent-lsp--published-tick nil
  "`buffer-chars-modified-tick' when a language server last published.")

(cl-defmethod eglot-handle-notification :after
  (_server (_method (eql textDocument/publishDiagnostics)) &key uri
           &allow-other-keys)
  "Note when the diagnostics of URI's buffer were published."
  (let ((buffer (and (stringp uri) (find-buffer-visiting (agent-lsp--uri-to-path uri)))))
    (when buffer
      (with-current-buffer buffer
        (setq agent-lsp--published-tick (buffer-chars-modified-tick))))))

(defun agent-lsp--checked-p (buffer server after-version)
  "Non-nil once BUFFER's Flymake diagnostics describe its current text.
That is: when SERVER manages BUFFER, its version is at least
AFTER-VERSION; when another Eglot server manages it, that server
published since the last change; no change since Flymake last
started, and every backend that started has reported."
  (with-current-buffer buffer
    (let ((manager (eglot-current-server)))
      (and (or (not (eq manager server))
               (not (numberp after-version))
               (>= eglot--versioned-identifier after-version))
           (or (null manager) (eq manager server)
               (eql agent-lsp--published-tick (buffer-chars-modified-tick)))
           (or (not (bound-and-true-p flymake-mode))
               (and (null flymake--recent-changes)
                    (cl-subsetp (flymake-running-backends)
                                (flymake-reporting-backends))))))))

(defun agent-lsp--check-now (buffers)
  "Have Flymake check those of BUFFERS changed since its last check now.
It would wait for `flymake-no-changes-timeout', and never check a
buffer no window shows."
  (dolist (buffer buffers)
    (when (buffer-live-p buffer)
      (with-current-buffer buffer
        (when (and (bound-and-true-p flymake-mode) flymake--recent-changes)
          (flymake-start))))))

(defun agent-lsp--diagnostic-targets (server uris)
  "(URI . BUFFER-OR-NIL) for URIS, or for SERVER's project buffers if nil."
  (if uris
      (mapcar (lambda (uri)
                (cons uri (find-buffer-visiting (agent-lsp--uri-to-path uri))))
              (append uris nil))
    (let ((root (agent-lsp--server-root server)))
      (delq nil
            (mapcar (lambda (buffer)
                      (let ((file (buffer-file-name buffer)))
                        (and file root (file-in-directory-p file root)
                             (buffer-local-value 'flymake-mode buffer)
                             (cons (agent-lsp--path-to-uri file) buffer))))
                    (buffer-list))))))

(defun agent-lsp--diagnostics-answer (targets encoding)
  "The `agentLsp/diagnostics' answer for TARGETS, positions in ENCODING."
  (vconcat
   (mapcar (lambda (target)
             (list :uri (car target)
                   :diagnostics (if (buffer-live-p (cdr target))
                                    (agent-lsp--diagnostics-of (cdr target)
                                                               encoding)
                                  [])))
           targets)))

(cl-defmethod eglot-handle-request
  (server (_method (eql agentLsp/diagnostics))
          &key uris afterVersion &allow-other-keys)
  "What Flymake shows for URIS (all SERVER's files if absent), as LSP.
With AFTERVERSION, wait until Flymake checked that version, at most 2 s."
  (let* ((targets (agent-lsp--diagnostic-targets server uris))
         (buffers (delq nil (mapcar #'cdr targets)))
         (encoding (agent-lsp--position-encoding server)))
    (when afterVersion
      (run-at-time 0 nil #'agent-lsp--check-now buffers))
    (agent-lsp--answer-when
     server
     (and afterVersion
          (lambda ()
            (cl-every (lambda (b)
                        (or (not (buffer-live-p b))
                            (agent-lsp--checked-p b server afterVersion)))
                      buffers)))
     agent-lsp--diagnostics-wait
     (lambda () (agent-lsp--diagnostics-answer targets encoding)))))

(provide 'agent-lsp-diagnostics)
;;; agent-lsp-diagnostics.el ends here
