;;; agent-lsp-base.el --- Options, server connection and plumbing of agent-lsp -*- lexical-binding: t; -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; The part of agent-lsp.el that the other files build on: the options,
;; the runs seen in this Emacs session, the Eglot connection (its class,
;; settings and capabilities).  Load `agent-lsp', not this file.

;;; Code:

(require 'cl-lib)
(require 'seq)
(require 'subr-x)
(require 'jsonrpc)
(require 'eglot)

;; Eglot internals this package still uses, each because Eglot offers no
;; public way to do it (checked against Eglot 1.9 and the Eglot of Emacs
;; 29 and 30); everything else goes through Eglot's public functions,
;; hooks and generic functions.
;; - `eglot--project': the project of a given server (slot accessor; Eglot
;;   has a public reader for its nickname only).
;; - `eglot--server-info': the serverInfo the server sent (slot accessor, no
;;   public reader): tells an agent-lsp server started from a plain command.
;; - `eglot--capabilities': a given server's capabilities (slot accessor;
;;   `eglot-server-capable', Eglot >= 1.16, reads only the current
;;   buffer's server): the position encoding the server chose.
;; - `eglot--signal-textDocument/didChange': sends the pending changes now
;;   (Eglot sends them on an idle timer only), before a run reads them.
;; - `eglot--versioned-identifier': a managed buffer's LSP document version
;;   (no public accessor), to answer `afterVersion'.
;; - `eglot--path-to-uri', `eglot--uri-to-path': only on Eglot < 1.16; the
;;   public `eglot-path-to-uri' and `eglot-uri-to-path' from 1.16 on.
;; - `eglot--major-modes': the major modes a given server was started for
;;   (slot accessor, no public reader): tells agent-lsp started beside
;;   another server (code intelligence asks that server).
;; - `eglot--cached-server': bound to nil while agent-lsp visits a file to
;;   answer a code-intel request, since Eglot binds it to the requesting
;;   server during dispatch and the new buffer would take agent-lsp for its
;;   own server (no public way to visit a file outside that binding).
(declare-function eglot--project "eglot" (server))
(declare-function eglot--server-info "eglot" (server))
(declare-function eglot--capabilities "eglot" (server))
(declare-function eglot--signal-textDocument/didChange "eglot" ())
(declare-function eglot--path-to-uri "eglot" (path))
(declare-function eglot--uri-to-path "eglot" (uri))
(declare-function eglot-path-to-uri "eglot" (path))    ; Eglot >= 1.16
(declare-function eglot-uri-to-path "eglot" (uri))     ; Eglot >= 1.16
(defvar eglot-lsp-context)              ; public, documented in eglot.el


;;; Customization

(defgroup agent-lsp nil
  "The agent-lsp coding agent, served over LSP and reached through Eglot."
  :group 'tools
  :prefix "agent-lsp-")

(defcustom agent-lsp-server-command '("agent-lsp")
  "Command that starts the agent-lsp server on stdio: (PROGRAM ARGS...).
For example \\='(\"agent-lsp\"), \\='(\"~/.venvs/agent/bin/agent-lsp\") or
\\='(\"python3\" \"-m\" \"agent_lsp\" \"serve\" \"--stdio\").  Install the
server from a clone of agent-lsp with \"pipx install .\" (not on
PyPI yet; once published: \"pipx install agent-lsp-server\").  Only
the global value counts (a project's local variables cannot choose
the program).
Takes effect when the server (re)starts: \\[agent-lsp-restart]."
  :type '(repeat string))
(put 'agent-lsp-server-command 'risky-local-variable t)

(defcustom agent-lsp-settings nil
  "The server's settings, sent as LSP `initializationOptions'.
A plist (or alist) mirroring the server's nested camelCase settings:

  (:model \"gpt-4.1-mini\"
   :baseUrl \"http://localhost:11434/v1\"
   :approval (:default \"ask\" :allowCommands [\"pytest\"])
   :pricing (:gpt-4.1-mini (:inputPerMTok 0.4 :outputPerMTok 1.6))
   :mcpServers (:time (:command \"uvx\" :args [\"mcp-server-time\"])))

Setting names may be written in kebab-case too (`:base-url'): they
are sent in camelCase.  The names inside `:pricing', `:mcpServers',
`:tools', `:env', `:headers', `:hooks', `:modelAliases' and
`:languageServers' `:servers' are yours (models, servers, tools,
variables) and go as written; `:mcpServers' may also be the JSON
text of an \"mcpServers\" object pasted from another tool.  Lists of
strings or numbers are sent as JSON arrays, t as true, `:json-false'
as false.

These are the user's own settings: the trust-boundary keys
\(`baseUrl', `apiKeyEnv', `transcriptDir', `memoryFiles', `mcpServers',
`approval.*', `mcp.*', `sandbox.*') are only honoured from here, never
from a project's `workspace/configuration'; and only the global value
is sent, so a project's local variables cannot change them.  They
apply when the server starts; setting this option with Customize
restarts running servers, after a `setq' use \\[agent-lsp-restart]."
  :type '(plist :key-type symbol :value-type sexp)
  :set (lambda (symbol value)
         (set-default symbol value)
         (when (fboundp 'agent-lsp--settings-changed)
           (agent-lsp--settings-changed))))
(put 'agent-lsp-settings 'risky-local-variable t)

(defcustom agent-lsp-save-after-edit t
  "Non-nil means save the buffers an agent edit touched once applied.
The agent's commands (tests, builds) then see its edits on disk.  A
buffer that had unsaved changes before the edit is left unsaved."
  :type 'boolean)

(defcustom agent-lsp-confirm-edits nil
  "Non-nil means ask y/n before applying each edit of the agent.
This is `eglot-confirm-server-initiated-edits' for agent-lsp only.
Nil by default: the agent asks its own approval before it edits."
  :type 'boolean)

(defcustom agent-lsp-show-diff t
  "Non-nil means show an edit's diff before asking to approve it."
  :type 'boolean)

(defcustom agent-lsp-ask-deny-reason t
  "Non-nil means ask for an optional reason after Deny.
The reason goes back to the agent with the denial."
  :type 'boolean)

(defcustom agent-lsp-display-stream t
  "Non-nil means show the stream buffer when a run starts."
  :type 'boolean)

(defcustom agent-lsp-stream-buffer-name "*agent-lsp*"
  "Name of the buffer that shows the agents' streamed output."
  :type 'string)

(defcustom agent-lsp-request-timeout 10
  "Seconds to wait for the server's answer to a command."
  :type 'number)

(defcustom agent-lsp-mode-line-max-width 50
  "Maximum width of the run status shown in the mode line."
  :type 'integer)

(defvar agent-lsp-stream-functions nil
  "Abnormal hook run with (SERVER EVENT) for each `agentLsp/stream' event.
EVENT is the notification's params, a plist (:runId :seq :kind :text ...).")

(defvar agent-lsp-run-finished-functions nil
  "Abnormal hook run with (RUN-ID REPORT) when a run stops.
REPORT is the run report, a plist (:stopReason :summary ...).")

(defvar agent-lsp-approval-functions nil
  "Abnormal hook run with (MESSAGE ANSWER) once an approval is answered.
ANSWER is the chosen action's title, or nil for a dismissal (a denial).")


;;; State

(cl-defstruct (agent-lsp--run (:constructor agent-lsp--make-run)
                              (:copier nil))
  id session server title status stop report mode usage)

(defvar agent-lsp--runs nil
  "The runs of this Emacs session, newest first.")

(defvar agent-lsp--sessions (make-hash-table :test #'eq :weakness 'key)
  "Server -> the sessionId that the next run on that server continues.")

(defvar agent-lsp--models (make-hash-table :test #'eq :weakness 'key)
  "Server -> the model the next runs on that server use (a pick).")


;;; Server class, registration, settings

(defclass agent-lsp-server (eglot-lsp-server)
  ((start-args :initform nil :accessor agent-lsp--start-args
               :documentation "(MODES PROJECT LANGUAGE-ID) it started with."))
  :documentation "An Eglot connection to the agent-lsp server.")

(defconst agent-lsp--sidecar-mode 'agent-lsp-no-buffers-mode
  "Pseudo major mode of an agent-lsp server that manages no buffers.")

;;;###autoload
(defun agent-lsp-eglot-contact (&optional _interactive)
  "The Eglot contact of agent-lsp, a value for `eglot-server-programs'.
For example:
  (add-to-list \\='eglot-server-programs
               \\='((python-mode js-mode) . agent-lsp-eglot-contact))"
  (let ((command (default-value 'agent-lsp-server-command)))
    (unless (and (consp command) (cl-every #'stringp command))
      (user-error "agent-lsp: `agent-lsp-server-command' must be a list of \
strings, not %S" command))
    (cons 'agent-lsp-server (copy-sequence command))))

(defun agent-lsp--camel-case (key)
  "KEY (a keyword or symbol, kebab-case or camelCase) as a camelCase keyword."
  (let* ((name (string-remove-prefix ":" (format "%s" key)))
         (parts (split-string name "[-_]" t)))
    (intern (concat ":" (car parts) (mapconcat #'capitalize (cdr parts) "")))))

(defun agent-lsp--plist-p (value)
  "Non-nil if VALUE is a non-empty plist with keyword keys."
  (and (consp value) (keywordp (car value)) (proper-list-p value)
       (cl-evenp (length value))
       (cl-loop for (k _v) on value by #'cddr always (keywordp k))))

(defun agent-lsp--alist-p (value)
  "Non-nil if VALUE is a non-empty alist with symbol or string keys."
  (and (consp value) (proper-list-p value)
       (cl-every (lambda (cell)
                   (and (consp cell) (car cell)
                        (or (symbolp (car cell)) (stringp (car cell)))))
                 value)))

(defconst agent-lsp--verbatim-keys
  '(:pricing :mcpServers :tools :env :headers :hooks :servers :modelAliases)
  "Settings whose keys are the user's names (models, servers, tools, variables).
Below them keys are sent exactly as written, never camelCased.")

(defun agent-lsp--key (key verbatim)
  "KEY as a keyword for JSON: camelCased unless VERBATIM."
  (cond (verbatim (if (keywordp key) key
                    (intern (concat ":" (if (stringp key) key
                                          (symbol-name key))))))
        (t (agent-lsp--camel-case key))))

(defun agent-lsp--to-json (value &optional verbatim)
  "Settings VALUE in the plist and vector form that Eglot sends as JSON.
Keys are camelCased, except with VERBATIM and below the keys in
`agent-lsp--verbatim-keys'."
  (cl-flet ((pair (k v)
              (let ((key (agent-lsp--key k verbatim)))
                (list key
                      (if (and (eq key :mcpServers) (stringp v))
                          ;; pasted JSON text: {"name": {...}} or {"mcpServers": {...}}
                          (let ((parsed (json-parse-string
                                         v :object-type 'plist :array-type 'array
                                         :null-object nil :false-object :json-false)))
                            (or (plist-get parsed :mcpServers) parsed))
                        (agent-lsp--to-json
                         v (or verbatim
                               (memq key agent-lsp--verbatim-keys))))))))
    (cond
     ((memq value '(:json-false :false)) :json-false)
     ((memq value '(nil t)) value)
     ((agent-lsp--plist-p value)
      (cl-loop for (k v) on value by #'cddr append (pair k v)))
     ((agent-lsp--alist-p value)
      (cl-loop for (k . v) in value append (pair k v)))
     ((or (vectorp value) (proper-list-p value))
      (vconcat (mapcar (lambda (v) (agent-lsp--to-json v verbatim)) value)))
     ((and (symbolp value) (not (keywordp value))) (symbol-name value))
     (t value))))

(defun agent-lsp-initialization-options ()
  "The `initializationOptions' built from the global `agent-lsp-settings'."
  (or (agent-lsp--to-json (default-value 'agent-lsp-settings))
      (make-hash-table)))

(cl-defmethod eglot-initialization-options ((_server agent-lsp-server))
  "The contact's `:initializationOptions', else `agent-lsp-settings'.
Eglot's own method gives the contact's options, or {} without any."
  (let ((contact-options (cl-call-next-method)))
    (if (or (null contact-options)
            (and (hash-table-p contact-options)
                 (zerop (hash-table-count contact-options))))
        (agent-lsp-initialization-options)
      contact-options)))

(defvar agent-lsp--beside nil
  "Non-nil while an agent-lsp server that manages no buffers connects.
Its capabilities then advertise `experimental.agentLsp.codeIntel': the
other Eglot servers answer `agentLsp/codeIntel' (agent-lsp-code-intel.el).")

(cl-defmethod eglot-client-capabilities ((_server agent-lsp-server))
  "Eglot's capabilities plus `experimental.agentLsp.diagnostics'.
This client answers `agentLsp/diagnostics' from Flymake, and beside
another server `agentLsp/codeIntel' from it.  `window' is
left as this Eglot describes it: the server asks approvals with
`window/showMessageRequest' whatever it says."
  (let* ((caps (copy-sequence (cl-call-next-method)))
         (experimental (plist-get caps :experimental))
         (ours (if agent-lsp--beside (list :diagnostics t :codeIntel t)
                 (list :diagnostics t))))
    (plist-put caps :experimental
               (cond ((and (hash-table-p experimental)
                           (> (hash-table-count experimental) 0))
                      (let ((copy (copy-hash-table experimental)))
                        (puthash "agentLsp" ours copy)
                        copy))
                     ((consp experimental)
                      (append experimental (list :agentLsp ours)))
                     (t (list :agentLsp ours))))))

(defun agent-lsp--server-p (server)
  "Non-nil if SERVER is a live Eglot connection to agent-lsp."
  (and server
       (or (cl-typep server 'agent-lsp-server)
           (equal (plist-get (ignore-errors (eglot--server-info server)) :name)
                  "agent-lsp"))
       (jsonrpc-running-p server)))

(defvar agent-lsp--known-servers nil
  "Eglot servers started since this package loaded, live ones only.
Filled from `eglot-server-initialized-hook' (public), so that the
agent-lsp servers among them can be found without Eglot's internal
table of servers.")

(defun agent-lsp--note-server (server)
  "Remember SERVER, a new Eglot server (maybe agent-lsp: known later)."
  (setq agent-lsp--known-servers
        (cons server (seq-filter #'jsonrpc-running-p agent-lsp--known-servers))))

;; Only records the server: no other server's behaviour changes.
(add-hook 'eglot-server-initialized-hook #'agent-lsp--note-server)

(defun agent-lsp--all-servers ()
  "Every live agent-lsp server, newest first."
  (seq-filter #'agent-lsp--server-p agent-lsp--known-servers))

(defun agent-lsp--project ()
  "The current buffer's project, found as Eglot finds it."
  ;; `eglot-lsp-context' lets `project-find-functions' know it is for LSP
  (let ((eglot-lsp-context t))
    (or (project-current)
        (cons 'transient (expand-file-name default-directory)))))

(defun agent-lsp--root (project)
  "PROJECT's root directory, as an absolute directory name, or nil."
  (let ((root (ignore-errors (project-root project))))
    (and root (file-name-as-directory (expand-file-name root)))))

(defun agent-lsp--server-root (server)
  "The root directory of SERVER's project, or nil."
  (agent-lsp--root (ignore-errors (eglot--project server))))

(defun agent-lsp--server ()
  "The agent-lsp server for the current buffer, or nil."
  (let ((current (eglot-current-server)))
    (cond
     ((agent-lsp--server-p current) current)
     ((let ((root (agent-lsp--root (agent-lsp--project))))
        (and root
             (cl-find root (agent-lsp--all-servers)
                      :key #'agent-lsp--server-root :test #'equal))))
     ((not buffer-file-name)
      ;; the stream buffer and other non-file buffers: the newest run's
      ;; server, or the only server
      (let ((all (agent-lsp--all-servers))
            (newest (seq-find
                     (lambda (run)
                       (agent-lsp--server-p (agent-lsp--run-server run)))
                     agent-lsp--runs)))
        (cond (newest (agent-lsp--run-server newest))
              ((null (cdr all)) (car all))))))))

(defun agent-lsp--language-id ()
  "The LSP language id of the current major mode."
  (or (get major-mode 'eglot-language-id)
      (string-remove-suffix "-mode" (symbol-name major-mode))))

;;;###autoload
(defun agent-lsp-start ()
  "Start the agent-lsp server for the current buffer's project; return it.
When no other Eglot server manages the buffer's major mode in the
project, agent-lsp manages those buffers: the agent reads their
unsaved text and its edits are checked against their versions.  When
another server manages them (Eglot 1.9 has one server per major mode
and project), agent-lsp starts beside it, managing no buffers: the
agent reads the files from disk."
  (interactive)
  (or (agent-lsp--server)
      (let* ((other (eglot-current-server))
             (sidecar (or (not buffer-file-name)
                          (and other (jsonrpc-running-p other))))
             (server (let ((agent-lsp--beside sidecar))
                       (agent-lsp--connect
                        (list (if sidecar agent-lsp--sidecar-mode major-mode))
                        (agent-lsp--project)
                        (if sidecar "plaintext" (agent-lsp--language-id))))))
        (when (and sidecar other)
          (message "agent-lsp: started beside %s, managing no buffers"
                   (jsonrpc-name other)))
        (if (agent-lsp--server-p server) server (agent-lsp--server)))))

(defun agent-lsp--connect (modes project language-id)
  "Start agent-lsp for the major MODES of PROJECT, with LANGUAGE-ID."
  (let* ((contact (agent-lsp-eglot-contact))
         ;; wait for `initialize' (C-g gives up) instead of a few seconds,
         ;; so that a second command does not start a second server
         (eglot-sync-connect t)
         ;; `eglot' from a buffer that no server manages: called from the
         ;; file's buffer, Eglot <= 1.15 would shut down its other server.
         ;; A single language id is taken by every Eglot (>= 1.16 makes a
         ;; list of it).
         (server (with-temp-buffer
                   (eglot modes project (car contact) (cdr contact)
                          language-id))))
    (when (cl-typep server 'agent-lsp-server)
      (setf (agent-lsp--start-args server) (list modes project language-id)))
    server))

(defun agent-lsp--ensure-server ()
  "The agent-lsp server for the current buffer, started when needed."
  (or (agent-lsp--server)
      (agent-lsp-start)
      (user-error "agent-lsp: the server did not start (see *EGLOT* buffers)")))

(defun agent-lsp-restart ()
  "Restart the running agent-lsp servers with the current settings.
Their runs are cancelled and their sessions forgotten."
  (interactive)
  (dolist (server (agent-lsp--all-servers))
    (let ((args (and (cl-typep server 'agent-lsp-server)
                     (agent-lsp--start-args server))))
      (if (null args)
          (eglot-reconnect server)      ; started from `eglot-server-programs'
        (ignore-errors (eglot-shutdown server))
        (let ((agent-lsp--beside (memq agent-lsp--sidecar-mode (car args))))
          (apply #'agent-lsp--connect args))))))

(defun agent-lsp--settings-changed ()
  "Restart the running agent-lsp servers: `agent-lsp-settings' changed."
  (when (agent-lsp--all-servers)
    (message "agent-lsp: settings changed, restarting the server")
    (agent-lsp-restart)))

(defun agent-lsp--approval-timeout (server)
  "Return how long SERVER waits for an approval before denying it."
  (let* ((options (ignore-errors (eglot-initialization-options server)))
         (approval (and (consp options) (plist-get options :approval)))
         (timeout (and (consp approval) (plist-get approval :timeout))))
    (if (and (numberp timeout) (> timeout 0)) timeout 300)))


;;; Runs

(defun agent-lsp--find-run (id)
  "The run whose id is ID, or nil."
  (cl-find id agent-lsp--runs :key #'agent-lsp--run-id :test #'equal))

(defun agent-lsp--ensure-run (server id)
  "The run ID of SERVER, created when unknown."
  (or (agent-lsp--find-run id)
      (car (push (agent-lsp--make-run :id id :server server) agent-lsp--runs))))

(defun agent-lsp--run-running-p (run)
  "Non-nil if RUN has not stopped and its server lives."
  (and (not (agent-lsp--run-stop run))
       (jsonrpc-running-p (agent-lsp--run-server run))))

(defun agent-lsp-running-runs ()
  "Return the ids of the runs still going, newest first."
  (mapcar #'agent-lsp--run-id
          (seq-filter #'agent-lsp--run-running-p agent-lsp--runs)))

(defun agent-lsp--one-line (text &optional width)
  "TEXT on one line, cut to WIDTH characters (default 60)."
  (truncate-string-to-width
   (string-trim (replace-regexp-in-string "[ \t\n\r]+" " " (or text "")))
   (or width 60) nil nil "..."))

(defun agent-lsp--error-message (err)
  "A readable message for ERR, an error object or a `jsonrpc-error' signal."
  (cond ((and (consp err) (keywordp (car err)))
         (or (plist-get err :message) (format "%S" err)))
        ((consp err)
         (or (alist-get 'jsonrpc-error-message (cdr err))
             (error-message-string err)))
        (t (format "%s" err))))

(defun agent-lsp--uri-to-path (uri)
  "The file name of URI, a file: URI, as Eglot makes it."
  (if (fboundp 'eglot-uri-to-path) (eglot-uri-to-path uri)
    (eglot--uri-to-path uri)))          ; Eglot < 1.16: no public function

(defun agent-lsp--path-to-uri (path)
  "The file: URI of PATH, as Eglot makes it (the server compares them)."
  (if (fboundp 'eglot-path-to-uri) (eglot-path-to-uri path)
    (eglot--path-to-uri path)))         ; Eglot < 1.16: no public function

(defun agent-lsp--managed-buffers (server)
  "The buffers that SERVER manages."
  (seq-filter (lambda (buffer)
                (with-current-buffer buffer
                  (and (eglot-managed-p) (eq (eglot-current-server) server))))
              (buffer-list)))

(defun agent-lsp--relative (uri server)
  "URI's file, relative to SERVER's project root when inside it."
  (let ((path (if (string-prefix-p "file:" uri) (agent-lsp--uri-to-path uri) uri))
        (root (agent-lsp--server-root server)))
    (if (and root (file-in-directory-p path root))
        (file-relative-name path root)
      (abbreviate-file-name path))))


(provide 'agent-lsp-base)
;;; agent-lsp-base.el ends here
