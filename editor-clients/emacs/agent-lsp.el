;;; agent-lsp.el --- Eglot client for the agent-lsp coding agent -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (eglot "1.9"))
;; Keywords: tools, languages, convenience

;; This file is not part of GNU Emacs.

;;; Commentary:

;; agent-lsp serves an LLM coding agent over the Language Server
;; Protocol.  This package connects Emacs to it through Eglot (Emacs >=
;; 28 with Eglot >= 1.9, as Debian 12 ships):
;;
;; - `agent-lsp-start' starts the server for the current project (the
;;   commands below start it when needed); `agent-lsp-eglot-contact' is
;;   the same server as an entry for `eglot-server-programs';
;; - `agent-lsp-run' reads a task in the minibuffer and starts a run on
;;   the current file; the next run continues the same conversation
;;   (with \\[universal-argument], a new one starts);
;; - `agent-lsp-ask-region' asks a question about the region, whose LSP
;;   range goes along;
;; - `agent-lsp-cancel' cancels the newest running run (asks which one
;;   when several run);
;; - every run's `agentLsp/stream' output is shown live in the
;;   *agent-lsp* buffer, and the running run's status in the mode line;
;; - approvals (`window/showMessageRequest' with Allow, Allow for
;;   session, Deny) are asked with `completing-read' and always
;;   answered: \\[keyboard-quit] is a denial;
;; - the agent's edits (`workspace/applyEdit') are applied without
;;   Eglot's y/n question (the agent asked its own approval) and the
;;   edited buffers are saved.
;;
;; The server's settings go in `agent-lsp-settings', e.g.
;;
;;   (setq agent-lsp-settings
;;         '(:model "gpt-4.1-mini" :approval (:default "ask")))

;;; Code:

(require 'cl-lib)
(require 'seq)
(require 'subr-x)
(require 'jsonrpc)
(require 'eglot)

;; Eglot internals this package relies on (present from Eglot 1.9 on).
(declare-function eglot--connect "eglot")
(declare-function eglot--current-project "eglot")
(declare-function eglot--path-to-uri "eglot")
(declare-function eglot--uri-to-path "eglot")
(declare-function eglot--pos-to-lsp-position "eglot")
(declare-function eglot--apply-workspace-edit "eglot")
(declare-function eglot--signal-textDocument/didChange "eglot")


;;; Customization

(defgroup agent-lsp nil
  "The agent-lsp coding agent, served over LSP and reached through Eglot."
  :group 'tools
  :prefix "agent-lsp-")

(defcustom agent-lsp-server-command '("agent-lsp")
  "Command that starts the agent-lsp server on stdio: (PROGRAM ARGS...).
For example \\='(\"agent-lsp\"), \\='(\"~/.venvs/agent/bin/agent-lsp\") or
\\='(\"python3\" \"-m\" \"agent_lsp\" \"serve\" \"--stdio\").
Takes effect when the server (re)starts: \\[agent-lsp-restart]."
  :type '(repeat string))

(defcustom agent-lsp-settings nil
  "The server's settings, sent as LSP `initializationOptions'.
A plist (or alist) mirroring the server's nested camelCase settings:

  (:model \"gpt-4.1-mini\"
   :baseUrl \"http://localhost:11434/v1\"
   :approval (:default \"ask\" :allowCommands [\"pytest\"]))

Keys may be written in kebab-case too (`:base-url'): they are sent in
camelCase.  Lists of strings or numbers are sent as JSON arrays, t as
true, `:json-false' as false.  These are the user's own settings: the
trust-boundary keys (`baseUrl', `apiKeyEnv', `transcriptDir',
`memoryFiles', `approval') are only honoured from here, never from a
project's `workspace/configuration'.  They apply when the server
starts; setting this option with Customize restarts running servers,
after a `setq' use \\[agent-lsp-restart]."
  :type '(plist :key-type symbol :value-type sexp)
  :set (lambda (symbol value)
         (set-default symbol value)
         (when (fboundp 'agent-lsp--settings-changed)
           (agent-lsp--settings-changed))))

(defcustom agent-lsp-save-after-edit t
  "Non-nil means save the buffers an agent edit touched once applied.
The agent's commands (tests, builds) then see its edits on disk."
  :type 'boolean)

(defcustom agent-lsp-confirm-edits nil
  "Non-nil means ask y/n before applying each edit of the agent.
This is `eglot-confirm-server-initiated-edits' for agent-lsp only.
Nil by default: the agent asks its own approval before it edits."
  :type 'boolean)

(defcustom agent-lsp-display-stream t
  "Non-nil means show the stream buffer when a run starts."
  :type 'boolean)

(defcustom agent-lsp-stream-buffer-name "*agent-lsp*"
  "Name of the buffer that shows the agents' streamed output."
  :type 'string)

(defcustom agent-lsp-request-timeout 10
  "Seconds to wait for the answer to `agentLsp.run' or `agentLsp.cancel'."
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
  id session server title status stop report)

(defvar agent-lsp--runs nil
  "The runs of this Emacs session, newest first.")

(defvar agent-lsp--sessions (make-hash-table :test #'eq :weakness 'key)
  "Server -> the sessionId that the next run on that server continues.")


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
  (unless (and (consp agent-lsp-server-command)
               (cl-every #'stringp agent-lsp-server-command))
    (user-error "agent-lsp: `agent-lsp-server-command' must be a list of \
strings, not %S" agent-lsp-server-command))
  (cons 'agent-lsp-server (copy-sequence agent-lsp-server-command)))

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
  "Non-nil if VALUE is a non-empty alist with symbol keys."
  (and (consp value) (proper-list-p value)
       (cl-every (lambda (cell)
                   (and (consp cell) (car cell) (symbolp (car cell))))
                 value)))

(defun agent-lsp--to-json (value)
  "Settings VALUE in the plist and vector form that Eglot sends as JSON."
  (cond
   ((memq value '(:json-false :false)) :json-false)
   ((memq value '(nil t)) value)
   ((agent-lsp--plist-p value)
    (cl-loop for (k v) on value by #'cddr
             append (list (agent-lsp--camel-case k) (agent-lsp--to-json v))))
   ((agent-lsp--alist-p value)
    (cl-loop for (k . v) in value
             append (list (agent-lsp--camel-case k) (agent-lsp--to-json v))))
   ((or (vectorp value) (proper-list-p value))
    (vconcat (mapcar #'agent-lsp--to-json value)))
   ((and (symbolp value) (not (keywordp value))) (symbol-name value))
   (t value)))

(defun agent-lsp-initialization-options ()
  "The `initializationOptions' built from `agent-lsp-settings'."
  (or (agent-lsp--to-json agent-lsp-settings) (make-hash-table)))

(cl-defmethod eglot-initialization-options ((server agent-lsp-server))
  "SERVER's contact's `:initializationOptions', else `agent-lsp-settings'."
  (if (plist-get (eglot--saved-initargs server) :initializationOptions)
      (cl-call-next-method)
    (agent-lsp-initialization-options)))

(cl-defmethod eglot-client-capabilities ((_server agent-lsp-server))
  "Eglot's capabilities plus `window.showMessage', which we answer well."
  (let ((caps (copy-sequence (cl-call-next-method))))
    (plist-put caps :window
               (list :showMessage
                     (list :messageActionItem
                           (list :additionalPropertiesSupport :json-false))))))

(defun agent-lsp--server-p (server)
  "Non-nil if SERVER is a live Eglot connection to agent-lsp."
  (and server
       (or (cl-typep server 'agent-lsp-server)
           (equal (plist-get (ignore-errors (eglot--server-info server)) :name)
                  "agent-lsp"))
       (jsonrpc-running-p server)))

(defun agent-lsp--all-servers ()
  "Every live agent-lsp server."
  (let (all)
    (maphash (lambda (_project servers)
               (dolist (s servers) (when (agent-lsp--server-p s) (push s all))))
             eglot--servers-by-project)
    all))

(defun agent-lsp--server ()
  "The agent-lsp server for the current buffer, or nil."
  (let ((current (eglot-current-server)))
    (cond
     ((agent-lsp--server-p current) current)
     ((cl-find-if #'agent-lsp--server-p
                  (gethash (eglot--current-project) eglot--servers-by-project)))
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
             (server (agent-lsp--connect
                      (list (if sidecar agent-lsp--sidecar-mode major-mode))
                      (eglot--current-project)
                      (if sidecar "plaintext" (agent-lsp--language-id)))))
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
         ;; `eglot--connect', not `eglot', which would shut down the
         ;; buffer's other server
         (server (eglot--connect
                  modes project (car contact) (cdr contact)
                  ;; Eglot >= 1.16 takes a list of language ids
                  (if (fboundp 'eglot--languages) (list language-id)
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
        (apply #'agent-lsp--connect args)))))

(defun agent-lsp--settings-changed ()
  "Restart the running agent-lsp servers: `agent-lsp-settings' changed."
  (when (and (boundp 'eglot--servers-by-project) (agent-lsp--all-servers))
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

(defun agent-lsp--command (server command argument on-success
                                  &optional on-error)
  "Send COMMAND with ARGUMENT to SERVER (`workspace/executeCommand').
Asynchronous: call ON-SUCCESS with the result, or ON-ERROR with a message."
  (let ((fail (lambda (msg)
                (if on-error (funcall on-error msg)
                  (message "agent-lsp: %s failed: %s" command msg)))))
    (jsonrpc-async-request
     server :workspace/executeCommand
     (list :command command :arguments (vector argument))
     :success-fn on-success
     :error-fn (lambda (err) (funcall fail (agent-lsp--error-message err)))
     :timeout-fn (lambda ()
                   (funcall fail (format "no answer within %ss"
                                         agent-lsp-request-timeout)))
     :timeout agent-lsp-request-timeout)))

(defun agent-lsp--flush-changes (server)
  "Flush the pending didChange of the buffers SERVER manages."
  (dolist (buffer (eglot--managed-buffers server))
    (when (buffer-live-p buffer)
      (with-current-buffer buffer
        (eglot--signal-textDocument/didChange)))))

(defun agent-lsp--plist-without (plist key)
  "PLIST without KEY."
  (cl-loop for (k v) on plist by #'cddr unless (eq k key) append (list k v)))

(defun agent-lsp--reusable-session (server)
  "Return SERVER's last session, unless a run of that session is going."
  (let ((session (gethash server agent-lsp--sessions)))
    (and session
         (not (seq-some (lambda (run)
                          (and (equal (agent-lsp--run-session run) session)
                               (agent-lsp--run-running-p run)))
                        agent-lsp--runs))
         session)))

(defun agent-lsp--send-run (server args &optional title retrying)
  "Start a run on SERVER with ARGS, the `agentLsp.run' argument plist.
TITLE names the run in the stream buffer.  The server's last session
continues unless ARGS has `:sessionId' (nil: a new session).  RETRYING
is set on the retry without a session the server forgot (a restart)."
  (let ((title (agent-lsp--one-line (or title (plist-get args :prompt)) 72))
        (args (cond ((plist-get args :sessionId) args)
                    ((plist-member args :sessionId)
                     (agent-lsp--plist-without args :sessionId))
                    ((agent-lsp--reusable-session server)
                     (append args (list :sessionId
                                        (agent-lsp--reusable-session server))))
                    (t args))))
    (agent-lsp--flush-changes server)
    (agent-lsp--command
     server "agentLsp.run" args
     (lambda (result)
       (let* ((id (plist-get result :runId))
              (session (plist-get result :sessionId))
              (run (and (stringp id) (agent-lsp--ensure-run server id))))
         (if (not run)
             (message "agent-lsp: unexpected answer to agentLsp.run: %S" result)
           (setf (agent-lsp--run-session run) session
                 (agent-lsp--run-title run) title)
           (when session (puthash server session agent-lsp--sessions))
           (agent-lsp--stream-header run)
           (when agent-lsp-display-stream (agent-lsp--display-stream))
           (force-mode-line-update t)
           (message "agent-lsp: run %s started: %s" id title))))
     (lambda (msg)
       (cond
        ((or retrying (not (plist-get args :sessionId))
             (not (string-match-p "unknown sessionId\\|still running" msg)))
         (message "agent-lsp: the run was refused: %s" msg))
        (t
         ;; the server forgot the session (it restarted), or a run
         ;; started a moment ago still uses it: go on in a new session
         (message "agent-lsp: %s; starting a new session" msg)
         (when (string-match-p "unknown sessionId" msg)
           (remhash server agent-lsp--sessions))
         (agent-lsp--send-run
          server (plist-put (copy-sequence args) :sessionId nil) title t)))))))

(defun agent-lsp--text-document ()
  "The current buffer's TextDocumentIdentifier, nil if it visits no file."
  (when buffer-file-name
    (list :uri (eglot--path-to-uri buffer-file-name))))

(defvar agent-lsp--history nil
  "Minibuffer history of agent tasks and questions.")

;;;###autoload
(defun agent-lsp-run (prompt &optional new-session)
  "Ask the agent to do PROMPT, about the current file.
The conversation of the previous run goes on (the agent remembers it)
unless NEW-SESSION (interactively, \\[universal-argument]) or that run
is still going."
  (interactive
   (list (read-string (if current-prefix-arg "Agent task (new session): "
                        "Agent task: ")
                      nil 'agent-lsp--history)
         current-prefix-arg))
  (when (string-empty-p (string-trim prompt))
    (user-error "agent-lsp: empty task"))
  (let ((server (agent-lsp--ensure-server))
        (doc (agent-lsp--text-document)))
    (agent-lsp--send-run server
                         `(:prompt ,prompt
                                   ,@(and doc `(:textDocument ,doc))
                                   ,@(and new-session '(:sessionId nil))))))

(defun agent-lsp-region-range (beg end)
  "The LSP range of BEG..END: 0-based lines, UTF-16 columns."
  (list :start (eglot--pos-to-lsp-position beg)
        :end (eglot--pos-to-lsp-position end)))

(defun agent-lsp--selection-prompt (question beg end range)
  "QUESTION followed by the text from BEG to END (at LSP RANGE), fenced."
  (let* ((text (buffer-substring-no-properties beg end))
         (fence (if (string-match-p "```" text) "~~~~" "```"))
         (name (if buffer-file-name (file-relative-name buffer-file-name)
                 (buffer-name))))
    (format "%s\n\nSelected text in %s (lines %d-%d):\n%s%s\n%s\n%s"
            question name
            (1+ (plist-get (plist-get range :start) :line))
            (1+ (plist-get (plist-get range :end) :line))
            fence (agent-lsp--language-id)
            (string-trim-right text "\n") fence)))

;;;###autoload
(defun agent-lsp-ask-region (beg end question &optional new-session)
  "Ask the agent QUESTION about the region from BEG to END.
The region's LSP range and its text go along with the question.
NEW-SESSION (interactively, \\[universal-argument]) starts a new session."
  (interactive
   (if (use-region-p)
       (list (region-beginning) (region-end)
             (read-string "Ask the agent about the region: "
                          nil 'agent-lsp--history)
             current-prefix-arg)
     (user-error "agent-lsp: select a region first")))
  (when (string-empty-p (string-trim question))
    (user-error "agent-lsp: empty question"))
  (let* ((beg (min beg end))
         (end (max beg end))
         (server (agent-lsp--ensure-server))
         (doc (agent-lsp--text-document))
         (range (agent-lsp-region-range beg end))
         (prompt (agent-lsp--selection-prompt question beg end range)))
    (deactivate-mark)
    (agent-lsp--send-run
     server
     `(:prompt ,prompt
               ,@(and doc `(:textDocument ,doc :range ,range))
               ,@(and new-session '(:sessionId nil)))
     question)))

(defun agent-lsp--read-run (prompt)
  "Read a running run's id with PROMPT: the newest, or a choice of several."
  (let ((runs (seq-filter #'agent-lsp--run-running-p agent-lsp--runs)))
    (cond
     ((null runs) (user-error "agent-lsp: no run is going"))
     ((null (cdr runs)) (agent-lsp--run-id (car runs)))
     (t
      (let* ((choices
              (mapcar (lambda (run)
                        (cons (format "%s  %s  [%s]" (agent-lsp--run-id run)
                                      (or (agent-lsp--run-title run) "")
                                      (agent-lsp--one-line
                                       (or (agent-lsp--run-status run)
                                           "running")
                                       40))
                              (agent-lsp--run-id run)))
                      runs))
             (choice (completing-read prompt choices nil t nil nil
                                      (caar choices))))
        (or (cdr (assoc choice choices)) (agent-lsp--run-id (car runs))))))))

;;;###autoload
(defun agent-lsp-cancel (run-id)
  "Cancel the run RUN-ID; the edits it already made stay.
Interactively, the newest running run, or a choice when several run."
  (interactive (list (agent-lsp--read-run "Cancel which agent run? ")))
  (let ((run (or (agent-lsp--find-run run-id)
                 (user-error "agent-lsp: unknown run %s" run-id))))
    (agent-lsp--command
     (agent-lsp--run-server run) "agentLsp.cancel" (list :runId run-id)
     (lambda (result)
       (message (if (eq result t) "agent-lsp: cancelling run %s"
                  "agent-lsp: run %s had already finished")
                run-id)))))

(defun agent-lsp-new-session ()
  "Forget the conversation, so that the next run starts a new session."
  (interactive)
  (let ((server (agent-lsp--server)))
    (when server (remhash server agent-lsp--sessions))
    (message "agent-lsp: the next run starts a new session")))

;; Code actions: "Ask agent about selection" (`ask: true') asks for the
;; question first, and code-action runs are tracked like the others.
(cl-defmethod eglot-execute-command
  ((server agent-lsp-server) (_command (eql agentLsp.run)) arguments)
  "Start the code action's `agentLsp.run' with ARGUMENTS on SERVER."
  (let* ((args (copy-sequence (elt arguments 0)))
         (prompt (or (plist-get args :prompt) ""))
         (default "Answer my question about this code.")
         (title nil))
    (when (eq (plist-get args :ask) t)
      (let ((question (read-string "Ask the agent about the selection: "
                                   nil 'agent-lsp--history)))
        (when (string-empty-p (string-trim question))
          (user-error "agent-lsp: empty question"))
        (setq title question
              prompt (if (string-prefix-p default prompt)
                         (concat question (substring prompt (length default)))
                       (concat question "\n\n" prompt)))))
    (agent-lsp--send-run
     server (plist-put (agent-lsp--plist-without args :ask) :prompt prompt)
     title)))


;;; The stream buffer

(defvar agent-lsp-stream-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "k") #'agent-lsp-cancel)
    (define-key map (kbd "C-c C-k") #'agent-lsp-cancel)
    (define-key map (kbd "r") #'agent-lsp-run)
    (define-key map (kbd "n") #'agent-lsp-new-session)
    map)
  "Keymap of `agent-lsp-stream-mode'.")

(define-derived-mode agent-lsp-stream-mode special-mode "Agent"
  "Major mode of the buffer that shows the agents' streamed output.
\\{agent-lsp-stream-mode-map}"
  (setq-local truncate-lines nil)
  (setq-local word-wrap t)
  (setq buffer-undo-list t))

(defvar-local agent-lsp--last-run nil
  "The run whose output the end of the stream buffer continues.")

(defvar-local agent-lsp--headed nil
  "The runs whose header line is in the stream buffer.")

(defvar agent-lsp--last-seq (make-hash-table :test #'equal)
  "Run id -> the last `seq' handled.")

(defun agent-lsp-stream-buffer ()
  "The stream buffer, created when needed."
  (or (get-buffer agent-lsp-stream-buffer-name)
      (with-current-buffer (get-buffer-create agent-lsp-stream-buffer-name)
        (agent-lsp-stream-mode)
        (current-buffer))))

(defun agent-lsp--display-stream ()
  "Show the stream buffer without selecting it."
  (display-buffer (agent-lsp-stream-buffer) '(nil (inhibit-same-window . t))))

(defun agent-lsp-show ()
  "Show the stream buffer."
  (interactive)
  (pop-to-buffer (agent-lsp-stream-buffer)))

(defun agent-lsp--append (text)
  "Append TEXT to the stream buffer; windows showing its end follow."
  (with-current-buffer (agent-lsp-stream-buffer)
    (let* ((inhibit-read-only t)
           (end (point-max))
           (followers (seq-filter (lambda (w) (>= (window-point w) end))
                                  (get-buffer-window-list nil nil t)))
           (at-end (>= (point) end)))
      (save-excursion
        (goto-char end)
        (insert text))
      (when at-end (goto-char (point-max)))
      (dolist (w followers) (set-window-point w (point-max))))))

(defun agent-lsp--append-lines (lines)
  "Append LINES (a string) on lines of their own."
  (with-current-buffer (agent-lsp-stream-buffer)
    (agent-lsp--append
     (concat (if (memq (char-before (point-max)) '(nil ?\n)) "" "\n")
             lines "\n"))))

(defun agent-lsp--stream-header (run)
  "Write RUN's header line in the stream buffer, once."
  (with-current-buffer (agent-lsp-stream-buffer)
    (let ((id (agent-lsp--run-id run)))
      (unless (member id agent-lsp--headed)
        (push id agent-lsp--headed)
        (agent-lsp--append-lines
         (propertize (format "## run %s%s" id
                             (if (agent-lsp--run-title run)
                                 (concat ": " (agent-lsp--run-title run))
                               ""))
                     'face 'bold))
        (setq agent-lsp--last-run id)))))

(defun agent-lsp--format-event (ev)
  "A readable line, or lines, for the non-text stream event EV."
  (let* ((kind (plist-get ev :kind))
         (report (plist-get ev :report))
         (error-p (and (equal kind "toolResult")
                       (eq (plist-get ev :ok) :json-false)))
         (label (pcase kind
                  ("toolCall" "tool")
                  ("toolResult" (if error-p "result: error" "result"))
                  ("approval" (format "approval: %s"
                                      (or (plist-get ev :state) "?")))
                  ("stop" (format "stop: %s"
                                  (or (plist-get report :stopReason) "?")))
                  (_ (format "%s" kind))))
         (text (or (plist-get ev :text) "")))
    (when (and (equal kind "toolCall") (string-empty-p text))
      (setq text (format "%s" (or (plist-get ev :tool) ""))))
    (when (and (equal kind "toolResult") (eq (plist-get ev :truncated) t)
               (plist-get ev :spillPath))
      (setq text (format "%s (truncated; full output in %s)"
                         text (plist-get ev :spillPath))))
    (when (and (equal kind "stop") (string-empty-p text))
      (setq text (or (plist-get report :summary) "")))
    (propertize (format "[%s] %s" label
                        (replace-regexp-in-string
                         "\n" "\n    " (string-trim-right text "\n+")))
                'face (cond ((equal kind "stop") 'bold)
                            ((equal kind "approval") 'warning)
                            (error-p 'error)
                            (t 'shadow)))))

(defun agent-lsp--render (run ev)
  "Show the stream event EV of RUN in the stream buffer."
  (let ((id (agent-lsp--run-id run))
        (kind (plist-get ev :kind)))
    (with-current-buffer (agent-lsp-stream-buffer)
      (cond ((not (member id agent-lsp--headed)) (agent-lsp--stream-header run))
            ((not (equal agent-lsp--last-run id))
             (agent-lsp--append-lines (format "[run %s]" id))
             (setq agent-lsp--last-run id)))
      (if (equal kind "text")
          (agent-lsp--append (or (plist-get ev :text) ""))
        (agent-lsp--append-lines (agent-lsp--format-event ev)))
      (when (equal kind "stop") (setq agent-lsp--last-run nil)))))

(defun agent-lsp--handle-stream (server ev)
  "Handle EV, an `agentLsp/stream' event from SERVER."
  (let* ((id (plist-get ev :runId))
         (seq (plist-get ev :seq))
         (kind (plist-get ev :kind))
         (last (and id (gethash id agent-lsp--last-seq))))
    (when (and (stringp id) (not (and (numberp seq) last (<= seq last))))
      (when (numberp seq) (puthash id seq agent-lsp--last-seq))
      (let ((run (agent-lsp--ensure-run server id)))
        (pcase kind
          ((or "status" "toolCall" "approval" "compaction")
           (setf (agent-lsp--run-status run)
                 (car (split-string (or (plist-get ev :text) "") "\n"))))
          ("stop"
           (let ((report (plist-get ev :report)))
             (setf (agent-lsp--run-stop run)
                   (or (plist-get report :stopReason) "stopped")
                   (agent-lsp--run-report run) report
                   (agent-lsp--run-status run) nil)
             (message "agent-lsp: run %s %s: %s" id (agent-lsp--run-stop run)
                      (agent-lsp--one-line (or (plist-get report :summary)
                                               (plist-get ev :text))
                                           120))
             (run-hook-with-args 'agent-lsp-run-finished-functions id report))))
        (agent-lsp--render run ev)
        (force-mode-line-update t)))
    (run-hook-with-args 'agent-lsp-stream-functions server ev)))

(cl-defmethod eglot-handle-notification
  (server (_method (eql agentLsp/stream)) &rest params)
  "Show PARAMS, an `agentLsp/stream' event from SERVER."
  (agent-lsp--handle-stream server params))


;;; Mode line

(defun agent-lsp-mode-line-string ()
  "Return the mode-line text about the running runs (\"\" if none)."
  (let ((running (seq-filter #'agent-lsp--run-running-p agent-lsp--runs)))
    (if (null running) ""
      (concat (propertize (if (cdr running)
                              (format "agent[%d]" (length running))
                            "agent")
                          'face 'bold)
              ": "
              (agent-lsp--one-line
               (or (agent-lsp--run-status (car running)) "starting")
               agent-lsp-mode-line-max-width)))))

(defvar agent-lsp--mode-line
  '(:eval (let ((s (agent-lsp-mode-line-string)))
            (unless (string-empty-p s) (concat " [" s "] "))))
  "Mode-line construct showing the running runs' status.")
(put 'agent-lsp--mode-line 'risky-local-variable t)

(defconst agent-lsp--mode-line-entry '("" agent-lsp--mode-line)
  "The element added to `mode-line-misc-info'.")

;; a list, not the bare symbol: a symbol heading `mode-line-misc-info' would
;; make the whole list a (SYMBOL THEN ELSE) conditional
(unless (member agent-lsp--mode-line-entry mode-line-misc-info)
  (setq mode-line-misc-info
        (cons agent-lsp--mode-line-entry mode-line-misc-info)))


;;; Answering server requests later
;;
;; Eglot 1.9 answers a server request with the value its handler returns,
;; from inside jsonrpc's process filter.  A handler that waits for the user
;; there (`completing-read') runs the event loop inside the filter: the
;; stream stops, and output arriving meanwhile re-enters jsonrpc 1.0.14's
;; filter, which loses or garbles messages.  So the approval and edit
;; handlers answer later instead, from a timer, once the filter is done:
;; jsonrpc's dispatch is wrapped to know the request id and to let a
;; handler leave without an answer.

(defvar agent-lsp--request-id nil
  "Id of the server request being dispatched, nil for other messages.")

(defun agent-lsp--dispatch (receive connection message &rest args)
  "Around `jsonrpc-connection-receive' (RECEIVE) of CONNECTION's MESSAGE.
Binds `agent-lsp--request-id' and lets a handler skip the answer by
throwing `agent-lsp--answer-later'.  ARGS go along unchanged."
  (let ((agent-lsp--request-id (and (plist-get message :method)
                                    (plist-get message :id))))
    (catch 'agent-lsp--answer-later
      (apply receive connection message args))))

(advice-add 'jsonrpc-connection-receive :around #'agent-lsp--dispatch)

(defun agent-lsp--send-answer (server id result)
  "Answer SERVER's request ID with RESULT."
  (if (not (jsonrpc-running-p server))
      (message "agent-lsp: the server is gone; its request was not answered")
    (condition-case err
        (jsonrpc-connection-send server :id id :result result)
      (error (message "agent-lsp: could not answer the server: %s"
                      (error-message-string err))))))

(defun agent-lsp--answer-later (server fn)
  "Answer the request being dispatched from SERVER with FN's value, later.
FN runs from a timer, outside jsonrpc's process filter.  Returns FN's
value at once instead when the request's id is unknown."
  (let ((id agent-lsp--request-id))
    (if (null id)
        (funcall fn)
      (run-at-time 0 nil (lambda ()
                           (agent-lsp--send-answer server id (funcall fn))))
      (throw 'agent-lsp--answer-later nil))))


;;; Approvals

(defvar agent-lsp--approval-queue nil
  "Approval requests waiting for the prompt: (SERVER ID MESSAGE ACTIONS).")

(defvar agent-lsp--approval-active nil
  "(SERVER ID TAG) of the approval being asked, or nil.")

(defun agent-lsp--ask (message titles timeout)
  "Ask MESSAGE, a choice among TITLES; nil after TIMEOUT seconds."
  (let ((enable-recursive-minibuffers t)
        (completion-ignore-case t))
    (with-timeout (timeout (message "agent-lsp: approval timed out: denied")
                           nil)
      (completing-read (format "[agent-lsp] %s\nChoose (C-g denies): " message)
                       titles nil t nil nil (car titles)))))

(defun agent-lsp--answer-approval (server message actions &optional tag)
  "Ask the approval MESSAGE of SERVER with ACTIONS; the answer, nil to deny.
Always returns: \\[keyboard-quit], an error, a throw to TAG (the server
withdrew the request) or no answer within the server's approval timeout
is a denial."
  (let* ((titles (delq nil (mapcar (lambda (a) (plist-get a :title))
                                   (append actions nil))))
         ;; the server withdraws the request after its approval timeout;
         ;; should that withdrawal get lost, give up a little later
         (timeout (+ (agent-lsp--approval-timeout server) 2))
         (answer
          (catch (or tag 'agent-lsp--no-tag)
            (condition-case err
                (agent-lsp--ask message (or titles '("OK")) timeout)
              (quit (message "agent-lsp: approval dismissed: denied")
                    nil)
              (error (message "agent-lsp: approval failed (%s): denied"
                              (error-message-string err))
                     nil))))
         (chosen (and (stringp answer)
                      (cl-find answer titles :test #'string=))))
    (run-hook-with-args 'agent-lsp-approval-functions message chosen)
    (and chosen (list :title chosen))))

(defun agent-lsp--next-approval ()
  "Ask the oldest queued approval, unless one is being asked."
  (when (and agent-lsp--approval-queue (not agent-lsp--approval-active))
    (pcase-let* ((`(,server ,id ,message ,actions)
                  (pop agent-lsp--approval-queue))
                 (tag (make-symbol "agent-lsp-withdrawn")))
      (setq agent-lsp--approval-active (list server id tag))
      (unwind-protect
          (agent-lsp--send-answer
           server id (agent-lsp--answer-approval server message actions tag))
        (setq agent-lsp--approval-active nil)
        (when agent-lsp--approval-queue
          (run-at-time 0 nil #'agent-lsp--next-approval))))))

(defun agent-lsp--withdraw (server id)
  "SERVER no longer waits for its request ID: close or drop its prompt."
  (pcase agent-lsp--approval-active
    (`(,(pred (eq server)) ,(pred (equal id)) ,tag)
     (message "agent-lsp: the agent stopped waiting for the approval: denied")
     ;; throw from a timer, not from inside jsonrpc's process filter
     (run-at-time 0 nil (lambda ()
                          (when (eq (nth 2 agent-lsp--approval-active) tag)
                            (throw tag nil))))))
  (let ((queued (seq-find (lambda (q) (and (eq (car q) server)
                                           (equal (cadr q) id)))
                          agent-lsp--approval-queue)))
    (when queued
      (setq agent-lsp--approval-queue (delq queued agent-lsp--approval-queue))
      (agent-lsp--send-answer server id nil))))

(cl-defmethod eglot-handle-request :around
  (server (method (eql window/showMessageRequest))
          &rest params &key message actions &allow-other-keys)
  "Ask SERVER's approval requests (MESSAGE, ACTIONS) one at a time.
Each is answered, later: a dismissal is a denial.  PARAMS go to
Eglot's METHOD handler when SERVER is not agent-lsp."
  (cond
   ((not (agent-lsp--server-p server))
    (apply #'cl-call-next-method server method params))
   ((null agent-lsp--request-id)
    (agent-lsp--answer-approval server message actions))
   (t
    (setq agent-lsp--approval-queue
          (append agent-lsp--approval-queue
                  (list (list server agent-lsp--request-id message actions))))
    (run-at-time 0 nil #'agent-lsp--next-approval)
    (throw 'agent-lsp--answer-later nil))))

(cl-defmethod eglot-handle-notification
  (server (_method (eql $/cancelRequest)) &key id &allow-other-keys)
  "SERVER withdrew its request ID (an approval that timed out)."
  (when (agent-lsp--server-p server)
    (agent-lsp--withdraw server id)))


;;; Edits

(defun agent-lsp--edit-paths (edit)
  "The paths of the files that the WorkspaceEdit EDIT touches."
  (let ((uris nil))
    (cl-loop for (uri _edits) on (plist-get edit :changes) by #'cddr
             do (push (if (keywordp uri) (substring (symbol-name uri) 1) uri)
                      uris))
    (seq-doseq (change (plist-get edit :documentChanges))
      (push (or (plist-get (plist-get change :textDocument) :uri)
                (plist-get change :uri))
            uris))
    (delete-dups (mapcar #'eglot--uri-to-path (delq nil uris)))))

(defun agent-lsp--prepare-edit (edit)
  "EDIT without resource operations: `create' is a new buffer, others fail."
  (let ((changes (plist-get edit :documentChanges)))
    (if (not (seq-some (lambda (c) (plist-get c :kind)) changes))
        edit
      (let ((kept nil))
        (seq-doseq (change changes)
          (pcase (plist-get change :kind)
            ('nil (push change kept))
            ("create" (agent-lsp--visit
                       (eglot--uri-to-path (plist-get change :uri))))
            (kind (jsonrpc-error "agent-lsp: cannot %s files" kind))))
        (plist-put (copy-sequence edit) :documentChanges
                   (vconcat (nreverse kept)))))))

(defun agent-lsp--visit (path)
  "A buffer visiting PATH, which may be a new file in a new directory."
  (let ((dir (file-name-directory path)))
    ;; the agent may create files in new directories (the user approved
    ;; it); a file in a missing directory would be visited read-only
    (unless (or (file-exists-p path) (file-directory-p dir))
      (make-directory dir t))
    (find-file-noselect path)))

(defun agent-lsp--save (buffer)
  "Save BUFFER, creating its directory, if it is modified."
  (with-current-buffer buffer
    (when (and buffer-file-name (buffer-modified-p))
      (let ((dir (file-name-directory buffer-file-name)))
        (unless (file-directory-p dir) (make-directory dir t)))
      (save-buffer))))

(defun agent-lsp--apply-edit (edit)
  "Apply EDIT, the agent's WorkspaceEdit; an ApplyWorkspaceEditResult.
A refused edit (a stale version, a declined confirmation) is
`applied: false' with the reason, not an error."
  (condition-case err
      (let* ((paths (agent-lsp--edit-paths edit))
             ;; visit first: Eglot asks before touching unvisited files
             (buffers (mapcar #'agent-lsp--visit paths)))
        (eglot--apply-workspace-edit (agent-lsp--prepare-edit edit)
                                     agent-lsp-confirm-edits)
        (dolist (buffer buffers)
          (with-current-buffer buffer
            (when (bound-and-true-p eglot--managed-mode)
              ;; the server gets the change before the answer
              (eglot--signal-textDocument/didChange))))
        (when agent-lsp-save-after-edit
          (mapc #'agent-lsp--save buffers))
        (list :applied t))
    (jsonrpc-error
     (list :applied :json-false :failureReason (agent-lsp--error-message err)))
    (quit
     (list :applied :json-false :failureReason "the user declined the edit"))
    (error
     (list :applied :json-false :failureReason (error-message-string err)))))

(cl-defmethod eglot-handle-request :around
  (server (method (eql workspace/applyEdit))
          &rest params &key edit &allow-other-keys)
  "Apply SERVER's EDIT without Eglot's question, then save it.
PARAMS go to Eglot's METHOD handler when SERVER is not agent-lsp."
  (if (agent-lsp--server-p server)
      (agent-lsp--answer-later server (lambda () (agent-lsp--apply-edit edit)))
    (apply #'cl-call-next-method server method params)))

(defun agent-lsp-unload-function ()
  "Remove the advice and the mode-line entry of agent-lsp."
  (advice-remove 'jsonrpc-connection-receive #'agent-lsp--dispatch)
  (setq mode-line-misc-info (delete agent-lsp--mode-line-entry
                                    mode-line-misc-info))
  nil)

(provide 'agent-lsp)
;;; agent-lsp.el ends here
