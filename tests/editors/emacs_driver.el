;;; emacs_driver.el --- drives agent-lsp.el in `emacs --batch' for test_emacs.py -*- lexical-binding: t; -*-

;; Loaded with `emacs -q --batch -l emacs_driver.el'.  Environment:
;;   EMACS_TEST_CLIENT     directory of agent-lsp.el
;;   EMACS_TEST_FILE       file to open (in the test workspace); "" for none
;;   EMACS_TEST_COMMAND    JSON list: the server command
;;   EMACS_TEST_SETTINGS   JSON object: `agent-lsp-settings'
;;   EMACS_TEST_SCENARIO   elisp file run once the server is up
;;   EMACS_TEST_RESULT     where the JSON result goes
;;   EMACS_TEST_DEADLINE   seconds the whole session may take
;;   EMACS_TEST_NO_START   set: the scenario starts the server itself
;;   EMACS_TEST_CAPS       the Eglot whose client capabilities to send:
;;                         "eglot-1.9" (as it runs here), "emacs-29", "emacs-30"
;;
;; The scenario uses `t-wait', `t-set', `t-stop-event', `t-events' and sets
;; `t-approval-answer' to what the (stubbed) approval prompt does:
;; a string (that action), `quit' (C-g) or `hang' (never answers), and
;; `t-reason-answer' to what is typed at the reason prompt after Deny.

(require 'cl-lib)
(require 'subr-x)
(require 'json)

(defvar t-started (float-time))
(defvar t-deadline (+ t-started (string-to-number
                                 (or (getenv "EMACS_TEST_DEADLINE") "25"))))
(defvar t-result-file (getenv "EMACS_TEST_RESULT"))
(defvar t-data nil "Plist of values the scenario records.")
(defvar t-errors nil)
(defvar t-events nil "Stream events, oldest first.")
(defvar t-prompts nil "Approval prompts seen, oldest first.")
(defvar t-approval-answers nil "(MESSAGE ANSWER) per answered approval.")
(defvar t-commands nil "Arguments of every workspace/executeCommand sent.")
(defvar t-edits nil "Every workspace/applyEdit received and its answer.")
(defvar t-mode-lines nil "The mode-line string after each stream event.")
(defvar t-approval-answer "Allow"
  "What the approval prompt does: an action title, `quit' or `hang'.")
(defvar t-reason-answer ""
  "What is typed at the reason prompt after Deny (`quit': C-g).")
(defvar t-y-or-n-answer nil
  "Function of (PROMPT) answering `y-or-n-p'; nil: an error.")
(defvar t-completing-read-answer nil
  "Function of (PROMPT COLLECTION) answering other `completing-read's.")
(defvar t-read-string-answer nil
  "Function of (PROMPT) answering other `read-string's; nil: the real one.")
(defvar t-server nil)
(defvar t-buffer nil)

(defun t-now () (- (float-time) t-started))

(defun t-log (fmt &rest args)
  (princ (format "[%6.2f] %s\n" (t-now) (apply #'format fmt args))
         #'external-debugging-output))

(defun t-set (key value)
  "Record VALUE under KEY (a keyword) in the result's data."
  (setq t-data (plist-put t-data key value)))

(defun t-wait (seconds pred what)
  "Run the event loop until PRED holds, at most SECONDS; error if it never does."
  (let ((end (min (+ (float-time) seconds) t-deadline)))
    (while (and (not (funcall pred)) (< (float-time) end))
      (accept-process-output nil 0.05))
    (or (funcall pred)
        (error "Timed out after %.1fs waiting for %s" seconds what))))

(defun t-flag (name)
  "Non-nil once pytest raised the flag NAME (a file in EMACS_TEST_FLAGS)."
  (file-exists-p (expand-file-name name (getenv "EMACS_TEST_FLAGS"))))

(defun t-events (&optional kind)
  (if kind (seq-filter (lambda (ev) (equal (plist-get ev :kind) kind)) t-events)
    t-events))

(defun t-stop-event (&optional run-id)
  (seq-find (lambda (ev) (and (equal (plist-get ev :kind) "stop")
                              (or (null run-id) (equal (plist-get ev :runId) run-id))))
            t-events))

(defun t-buffer-text (&optional buffer)
  (with-current-buffer (or buffer t-buffer)
    (buffer-substring-no-properties (point-min) (point-max))))

(defun t-json-safe (value)
  "VALUE made serializable by `json-serialize'."
  (cond ((memq value '(nil t :json-false)) value)
        ((keywordp value) (symbol-name value))
        ((symbolp value) (symbol-name value))
        ((or (stringp value) (numberp value)) value)
        ((vectorp value) (vconcat (mapcar #'t-json-safe value)))
        ((and (consp value) (keywordp (car value)) (cl-evenp (length value)))
         (cl-loop for (k v) on value by #'cddr append (list k (t-json-safe v))))
        ((proper-list-p value) (vconcat (mapcar #'t-json-safe value)))
        (t (format "%S" value))))

(defun t-buffer-string-or-nil (name)
  (let ((buffer (if (bufferp name) name (get-buffer name))))
    (and (buffer-live-p buffer)
         (with-current-buffer buffer
           (buffer-substring-no-properties (point-min) (point-max))))))

(defun t-write-result ()
  (let* ((server t-server)
         (result
          (list :data t-data
                :errors (vconcat (reverse t-errors))
                :events (vconcat t-events)
                :prompts (vconcat (reverse t-prompts))
                :approvalAnswers (vconcat (reverse t-approval-answers))
                :commands (vconcat (reverse t-commands))
                :edits (vconcat (reverse t-edits))
                :modeLines (vconcat (reverse t-mode-lines))
                :stream (t-buffer-string-or-nil "*agent-lsp*")
                :messages (t-buffer-string-or-nil "*Messages*")
                :eglotEvents (and server (ignore-errors
                                           (t-buffer-string-or-nil
                                            (jsonrpc-events-buffer server))))
                :stderr (and server (ignore-errors
                                      (t-buffer-string-or-nil
                                       (jsonrpc-stderr-buffer server))))
                :seconds (t-now))))
    (with-temp-file t-result-file
      (set-buffer-file-coding-system 'utf-8-unix)
      (insert (json-serialize (t-json-safe result) :null-object nil
                              :false-object :json-false)))))

(defun t-finish (code)
  (condition-case err (t-write-result)
    (error (t-log "could not write the result: %S" err)
           (setq code 3)))
  (kill-emacs code))

(defun t-format-mode-line (construct &optional depth)
  "CONSTRUCT rendered like the mode line (`format-mode-line' gives \"\" in batch).
Strings, symbols, (:eval FORM), (:propertize ELT ...), (SYMBOL THEN ELSE) and
lists; %-constructs are left as they are."
  (let ((depth (or depth 0)))
    (cond
     ((> depth 20) "")
     ((stringp construct) construct)
     ((memq construct '(nil t)) "")
     ((symbolp construct)
      (if (boundp construct) (t-format-mode-line (symbol-value construct) (1+ depth)) ""))
     ((and (consp construct) (eq (car construct) :eval))
      (t-format-mode-line (eval (cadr construct) t) (1+ depth)))
     ((and (consp construct) (eq (car construct) :propertize))
      (t-format-mode-line (cadr construct) (1+ depth)))
     ((and (consp construct) (symbolp (car construct)))
      (t-format-mode-line (if (and (boundp (car construct)) (symbol-value (car construct)))
                              (cadr construct) (car (cddr construct)))
                          (1+ depth)))
     ((and (consp construct) (integerp (car construct)))
      (t-format-mode-line (cdr construct) (1+ depth)))
     ((consp construct)
      (mapconcat (lambda (c) (t-format-mode-line c (1+ depth))) construct ""))
     (t ""))))

;; The client capabilities of the Eglot that each Emacs ships, for the server's
;; `initialize': the server must ask its approvals (showMessageRequest) with
;; each (CONTRACT "Approvals", PITFALLS "Editors under test").  Transcribed from
;; `eglot-client-capabilities' in eglot.el:
;; - "eglot-1.9": Debian 12's elpa-eglot 1.9, which runs these tests: no
;;   :window, no :general (nothing is overridden).
;; - "emacs-29": Emacs 29.1-29.3 ship Eglot 1.12 and 29.4 ships 1.12.29
;;   (`customize-package-emacs-version-alist' in eglot.el); eglot.el 1.12 as
;;   synced from Emacs into github.com/joaotavora/eglot (commit fb8111d,
;;   2023-03-13) sends no :window at all, and :general positionEncodings
;;   utf-32 first (the `:window (:workDoneProgress t)' of Eglot 1.15 and the
;;   showDocument of 1.16 came later, on Emacs's master only).
;; - "emacs-30": Emacs 30.1 ships Eglot 1.17.30: :window (:showDocument
;;   (:support t) :workDoneProgress t) and the same :general (eglot.el 1.16,
;;   joaotavora/eglot commit 88c46bd; an Eglot 1.17 `initialize' quoted in
;;   joaotavora/eglot issue 1443).
;; :workspace is the same in all three (applyEdit, workspaceEdit
;; documentChanges, configuration, workspaceFolders); :textDocument stays 1.9's
;; (the server reads none of it); :experimental stays the client's own.
(defconst t-eglot-capabilities
  '(("eglot-1.9")
    ("emacs-29" :general (:positionEncodings ["utf-32" "utf-8" "utf-16"]))
    ("emacs-30" :window (:showDocument (:support t) :workDoneProgress t)
                :general (:positionEncodings ["utf-32" "utf-8" "utf-16"])))
  "Eglot capability set name -> what replaces 1.9's :window and :general.")

(defvar t-caps (or (getenv "EMACS_TEST_CAPS") "eglot-1.9"))

(defun t-install-capabilities ()
  "Send the recorded :window and :general of `t-caps' instead of Eglot 1.9's."
  (let ((recorded (or (assoc t-caps t-eglot-capabilities)
                      (error "Unknown EMACS_TEST_CAPS %s" t-caps))))
    (when (cdr recorded)
      (cl-defmethod eglot-client-capabilities :around ((_server eglot-lsp-server))
        (let ((caps (cl-call-next-method)))
          (append (cdr recorded)
                  (cl-loop for (k v) on caps by #'cddr
                           unless (memq k '(:window :general)) append (list k v))))))))

(defun t-honour-position-encoding (server)
  "Count columns as SERVER negotiated, as the Eglot of Emacs 29 and 30 does
\(Eglot 1.9, which runs here, always counts UTF-16)."
  (let ((encoding (plist-get (eglot--capabilities server) :positionEncoding)))
    (t-set :position-encoding encoding)
    (when (equal encoding "utf-32")
      (setq eglot-current-column-function #'eglot-current-column
            eglot-move-to-column-function #'eglot-move-to-column))))

;; Never wait for a terminal.
(setq confirm-kill-processes nil
      make-backup-files nil
      create-lockfiles nil
      auto-save-default nil
      enable-local-variables nil)

;; A watchdog: whatever blocks, the result is written before pytest's timeout.
(run-at-time (max 1 (- t-deadline (float-time))) nil
             (lambda ()
               (push (format "driver deadline reached at %.1fs" (t-now)) t-errors)
               (t-finish 2)))

;; The approval prompt (and any other `completing-read') is scripted.
(setq completing-read-function
      (lambda (prompt collection &rest _)
        (let ((items (all-completions "" collection)))
          (cond
           ((string-match-p "\\`\\[agent-lsp\\]" prompt)
            ;; what a person sees meanwhile: the edit's diff, when shown
            (let ((diff (get-buffer "*agent-lsp diff*")))
              (push (list :prompt prompt :items (vconcat items) :t (t-now)
                          :diffShown (and diff (get-buffer-window diff t) t)
                          :diff (and diff (get-buffer-window diff t)
                                     (t-buffer-string-or-nil diff))
                          :diffMode (and diff (buffer-local-value 'major-mode diff)))
                    t-prompts))
            (t-log "approval prompt: %S -> %S" prompt t-approval-answer)
            (pcase t-approval-answer
              ('quit (signal 'quit nil))
              ('hang (let ((end (+ (float-time) 20)))
                       (while (< (float-time) end)
                         (accept-process-output nil 0.05)))
                     (push (format "approval prompt still open after 20s") t-errors)
                     (signal 'quit nil))
              ;; a person doing something first (killing a hunk in the diff)
              ((pred functionp) (funcall t-approval-answer prompt items))
              (answer answer)))
           (t-completing-read-answer
            (push (list :prompt prompt :items (vconcat items) :t (t-now)) t-prompts)
            (funcall t-completing-read-answer prompt items))
           (t (error "Unexpected completing-read: %s" prompt))))))

;; The optional reason after Deny, and y-or-n-p, are scripted too.
(advice-add 'read-string :around
            (lambda (fn prompt &rest args)
              (cond
               ((and t-read-string-answer
                     (not (string-prefix-p "[agent-lsp] Why deny" prompt)))
                (push (list :prompt prompt :t (t-now)) t-prompts)
                (funcall t-read-string-answer prompt))
               ((not (string-prefix-p "[agent-lsp] Why deny" prompt))
                (apply fn prompt args))
               (t
                (push (list :prompt prompt :answer t-reason-answer :t (t-now)) t-prompts)
                (if (eq t-reason-answer 'quit) (signal 'quit nil) t-reason-answer)))))
(advice-add 'y-or-n-p :override
            (lambda (prompt)
              (push (list :prompt prompt :t (t-now)) t-prompts)
              (if t-y-or-n-answer (funcall t-y-or-n-answer prompt)
                (error "Unexpected y-or-n-p: %s" prompt))))

(defun t-main ()
  (add-to-list 'load-path (getenv "EMACS_TEST_CLIENT"))
  (require 'eglot)
  (require 'agent-lsp)
  (t-install-capabilities)
  (advice-add 'eglot-client-capabilities :filter-return
              (lambda (caps) (t-set :capabilities caps) caps))
  (setq agent-lsp-server-command
        (append (json-parse-string (getenv "EMACS_TEST_COMMAND")) nil))
  (setq agent-lsp-settings
        (json-parse-string (getenv "EMACS_TEST_SETTINGS") :object-type 'plist
                           :null-object nil :false-object :json-false))
  (add-hook 'agent-lsp-stream-functions
            (lambda (_server ev)
              (setq t-events (append t-events (list ev)))
              (push (agent-lsp-mode-line-string) t-mode-lines)
              (t-log "stream %s %s %s: %S" (plist-get ev :runId) (plist-get ev :seq)
                     (plist-get ev :kind)
                     (truncate-string-to-width (or (plist-get ev :text) "") 70))))
  (add-hook 'agent-lsp-approval-functions
            (lambda (message answer)
              (push (list :message message :answer answer :t (t-now))
                    t-approval-answers)))
  (advice-add 'jsonrpc-async-request :before
              (lambda (_conn method params &rest _)
                (when (eq method :workspace/executeCommand)
                  (push params t-commands))))
  (advice-add 'agent-lsp--apply-edit :around
              (lambda (fn edit)
                (let ((answer (funcall fn edit)))
                  (push (list :edit edit :answer answer :t (t-now)) t-edits)
                  answer)))
  (let ((file (getenv "EMACS_TEST_FILE")))
    (unless (string-empty-p file)
      (setq t-buffer (find-file-noselect file))
      (set-buffer t-buffer)
      (switch-to-buffer t-buffer)))
  (unless (getenv "EMACS_TEST_NO_START")
    (setq t-server (agent-lsp-start))
    (t-log "server up: %S" (and t-server (jsonrpc-name t-server)))
    (unless t-server (error "agent-lsp-start returned nil"))
    (t-set :server-pid (process-id (jsonrpc--process t-server)))
    (t-honour-position-encoding t-server)
    (t-set :managed (and t-buffer (with-current-buffer t-buffer
                                    (bound-and-true-p eglot--managed-mode)))))
  (load (getenv "EMACS_TEST_SCENARIO") nil t))

(condition-case err
    (t-main)
  (error (push (format "%s" (error-message-string err)) t-errors)
         (t-log "error: %S" err)))
(t-finish 0)

;;; emacs_driver.el ends here
