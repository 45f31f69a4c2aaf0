;;; agent-lsp-code-intel.el --- Answers agentLsp/codeIntel from the other Eglot servers -*- lexical-binding: t; -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; The server asks `agentLsp/codeIntel {method, params}' for an LSP
;; request (definition, references, hover, symbols, call hierarchy,
;; rename) when the agent uses its code-intel tools.  When agent-lsp runs
;; beside your language server (it manages no buffers: the README's
;; "beside it" mode), that server answers: the file's buffer (visited now
;; when it is not, so Eglot manages it) is asked through its Eglot
;; server, positions converted between the two servers' encodings.  When
;; agent-lsp manages the buffers itself, no other Eglot server has them:
;; the client does not advertise `codeIntel' and agent-lsp's own started
;; servers answer (CONTRACT Decision 39).  Load `agent-lsp', not this
;; file.

;;; Code:

(require 'agent-lsp-base)
(require 'agent-lsp-rpc)
(require 'agent-lsp-diagnostics)

(defcustom agent-lsp-code-intel-timeout 25
  "Seconds a language server gets to answer one of the agent's requests."
  :type 'number
  :group 'agent-lsp)

(defconst agent-lsp--code-intel-capabilities
  '(("textDocument/definition" :definitionProvider)
    ("textDocument/references" :referencesProvider)
    ("textDocument/hover" :hoverProvider)
    ("textDocument/documentSymbol" :documentSymbolProvider)
    ("workspace/symbol" :workspaceSymbolProvider)
    ("textDocument/prepareCallHierarchy" :callHierarchyProvider)
    ("callHierarchy/incomingCalls" :callHierarchyProvider)
    ("callHierarchy/outgoingCalls" :callHierarchyProvider)
    ("textDocument/prepareRename" :renameProvider :prepareProvider)
    ("textDocument/rename" :renameProvider))
  "The server capability each method needs.")

(defun agent-lsp--capable-p (server method)
  "Non-nil if SERVER announced what METHOD needs."
  (let* ((path (cdr (assoc method agent-lsp--code-intel-capabilities)))
         (value (ignore-errors (eglot--capabilities server))))
    (and path
         (progn
           (dolist (key path)
             (setq value (and (consp value) (plist-get value key))))
           (and value (not (eq value :json-false)))))))

(defun agent-lsp--other-server-p (server)
  "Non-nil if SERVER is a live Eglot server other than agent-lsp."
  (and server (not (agent-lsp--server-p server)) (jsonrpc-running-p server)))

;; Eglot binds `eglot--cached-server' to the server whose request it
;; dispatches; in a buffer where that variable is not local yet (one
;; visited now), the binding is the default value, and that buffer would
;; take agent-lsp for its server.  Hence the nil binding below.

(defun agent-lsp--code-intel-buffer (uri)
  "The buffer of URI's file, visited (not shown) when it was not."
  (let ((file (ignore-errors (agent-lsp--uri-to-path uri))))
    (and file (file-readable-p file) (not (file-directory-p file))
         (or (find-buffer-visiting file)
             ;; Eglot manages a buffer of a mode and project it serves
             (let ((inhibit-message t) (eglot--cached-server nil))
               (find-file-noselect file))))))

(defun agent-lsp--buffer-server (buffer)
  "BUFFER's Eglot server when it is not agent-lsp, else nil."
  (let ((eglot--cached-server nil))
    (with-current-buffer buffer
      (let ((server (and (eglot-managed-p) (eglot-current-server))))
        (and (agent-lsp--other-server-p server) server)))))

(defun agent-lsp--project-servers (server)
  "The live other Eglot servers of agent-lsp SERVER's project."
  (let ((root (agent-lsp--server-root server)))
    (seq-filter (lambda (other)
                  (and (agent-lsp--other-server-p other)
                       (equal (agent-lsp--server-root other) root)))
                agent-lsp--known-servers)))

;;; Positions: agent-lsp's encoding <-> the other server's

(defun agent-lsp--point-of (position encoding)
  "The point of the LSP POSITION, its column in ENCODING's code units."
  (save-excursion
    (save-restriction
      (widen)
      (goto-char (point-min))
      (forward-line (plist-get position :line))
      (let ((units 0) (want (plist-get position :character)))
        (while (and (< units want) (not (eolp)))
          (let ((c (char-after)))
            (setq units (+ units (pcase encoding
                                   ("utf-32" 1)
                                   ("utf-8" (length (encode-coding-string
                                                     (string c) 'utf-8 t)))
                                   (_ (if (> c #xFFFF) 2 1)))))
            (forward-char 1)))
        (point)))))

(defun agent-lsp--position-p (value)
  "Non-nil if VALUE is an LSP position plist."
  (and (consp value) (keywordp (car value))
       (numberp (plist-get value :line)) (numberp (plist-get value :character))
       (= (length value) 4)))

(defun agent-lsp--convert (value uri from to)
  "VALUE (LSP JSON as plists) with every position recounted FROM -> TO.
A position belongs to the nearest enclosing :uri / :targetUri (or the
key of a WorkspaceEdit's :changes), else to URI."
  (cond
   ((agent-lsp--position-p value)
    (let ((buffer (and uri (agent-lsp--code-intel-buffer uri))))
      (if (not buffer) value
        (with-current-buffer buffer
          (agent-lsp--lsp-position (agent-lsp--point-of value from) to)))))
   ((vectorp value)
    (vconcat (mapcar (lambda (v) (agent-lsp--convert v uri from to)) value)))
   ((and (consp value) (keywordp (car value)))
    (let* ((here (or (plist-get value :uri) (plist-get value :targetUri)
                     (plist-get (plist-get value :textDocument) :uri)))
           (here (if (stringp here) here uri))
           (out nil))
      (while value
        (let ((key (pop value)) (v (pop value)))
          (push key out)
          (push (if (eq key :changes)
                    (let ((changes nil))
                      (while v
                        (let ((file (pop v)) (edits (pop v)))
                          (push file changes)
                          (push (agent-lsp--convert
                                 edits (substring (symbol-name file) 1) from to)
                                changes)))
                      (nreverse changes))
                  (agent-lsp--convert v here from to))
                out)))
      (nreverse out)))
   (t value)))

;;; The request

(defun agent-lsp--ask-other (server other method params uri reply)
  "Ask OTHER METHOD with PARAMS (for URI's file) on behalf of SERVER.
REPLY is called with the result (in SERVER's encoding) and nil, or nil
and an error message."
  (let* ((ours (agent-lsp--position-encoding server))
         (theirs (agent-lsp--position-encoding other))
         (same (equal ours theirs))
         (buffer (and uri (agent-lsp--code-intel-buffer uri))))
    (when (and buffer (fboundp 'eglot--signal-textDocument/didChange))
      (with-current-buffer buffer       ; its pending changes first
        (when (eglot-managed-p) (eglot--signal-textDocument/didChange))))
    (jsonrpc-async-request
     other (intern (concat ":" method))
     (if same params (agent-lsp--convert params uri ours theirs))
     :success-fn (lambda (result)
                   (funcall reply
                            (if (or same (null result)) result
                              (agent-lsp--convert result uri theirs ours))
                            nil))
     :error-fn (lambda (err)
                 (funcall reply nil (format "%s: %s" (jsonrpc-name other)
                                            (agent-lsp--error-message err))))
     :timeout-fn (lambda ()
                   (funcall reply nil (format "%s did not answer within %ss"
                                              (jsonrpc-name other)
                                              agent-lsp-code-intel-timeout)))
     :timeout agent-lsp-code-intel-timeout)))

(defun agent-lsp--code-intel-server (server method params)
  "The other Eglot server to ask METHOD with PARAMS, and the file's URI."
  (let* ((doc (plist-get params :textDocument))
         (uri (or (plist-get doc :uri) (plist-get (plist-get params :item) :uri)))
         (buffer (and (stringp uri) (agent-lsp--code-intel-buffer uri)))
         (candidates (cond (buffer (delq nil (list (agent-lsp--buffer-server buffer))))
                           ((stringp uri) nil)
                           (t (agent-lsp--project-servers server)))))
    (cons (seq-find (lambda (other) (agent-lsp--capable-p other method)) candidates)
          uri)))

(cl-defmethod eglot-handle-request
  (server (_method (eql agentLsp/codeIntel)) &key method params &allow-other-keys)
  "Answer METHOD with PARAMS from the file's other Eglot server, or null."
  (pcase-let ((`(,other . ,uri)
               (and (stringp method)
                    (agent-lsp--code-intel-server server method params))))
    (cond
     ((null other) nil)
     ((agent-lsp--deferrable-p server)
      (agent-lsp--later
       (lambda (id)
         (agent-lsp--ask-other server other method params uri
                               (lambda (result failure)
                                 (agent-lsp--send-answer server id result failure))))))
     (t
      ;; a plain connection cannot answer later: wait here (bounded)
      (let ((result nil) (failure nil) (done nil)
            (deadline (+ (float-time) agent-lsp-code-intel-timeout 1)))
        (agent-lsp--ask-other server other method params uri
                              (lambda (r f) (setq result r failure f done t)))
        (while (and (not done) (< (float-time) deadline))
          (accept-process-output nil 0.05))
        (when failure (jsonrpc-error failure))
        result)))))

(defun agent-lsp--beside-p (server)
  "Non-nil if SERVER (agent-lsp) was started beside another server."
  (let ((modes (ignore-errors (eglot--major-modes server))))
    (memq agent-lsp--sidecar-mode (if (listp modes) modes (list modes)))))

(provide 'agent-lsp-code-intel)
;;; agent-lsp-code-intel.el ends here
