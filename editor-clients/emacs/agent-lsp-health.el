;;; agent-lsp-health.el --- Pick a model, check the setup (agent-lsp) -*- lexical-binding: t; -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; `agent-lsp-pick-model' chooses among the models the endpoint lists
;; (`agentLsp.models', its GET /models) the one the next runs use.
;; `agent-lsp-check-health' checks what a run needs and says precisely
;; what is wrong: what only Emacs knows (the server program, Emacs and
;; Eglot), then the server's own checks (`agentLsp.health', those
;; `agent-lsp doctor' prints: the settings file, the API key, the model
;; endpoint, the model, ripgrep, the sandbox, the MCP servers).
;; `agent-lsp-setup' shows what the server found of the user's setup
;; (`agentLsp.setup', as `agent-lsp doctor').  Load `agent-lsp', not
;; this file.

;;; Code:

(require 'lisp-mnt)
(require 'agent-lsp-rpc)
(require 'agent-lsp-code-intel)


;;; Models

(defun agent-lsp--models (server)
  "SERVER's `agentLsp.models' answer: (:current :models :error)."
  (agent-lsp--call server "agentLsp.models"))

(defun agent-lsp--read-model (server)
  "Read a model for SERVER's next runs among the endpoint's; \"\" resets."
  (let* ((answer (agent-lsp--models server))
         (models (append (plist-get answer :models) nil))
         (err (plist-get answer :error))
         (current (or (gethash server agent-lsp--models)
                      (plist-get answer :current))))
    (when err (message "agent-lsp: the endpoint's model list: %s" err))
    (completing-read
     (format "Model for the next agent runs%s (now %s): "
             (if err (format " [no list: %s]" (agent-lsp--one-line err 80))
               "")
             current)
     models nil nil nil nil current)))

;;;###autoload
(defun agent-lsp-pick-model (model)
  "Use MODEL for the next runs (and the rest of their sessions).
Interactively, a choice among the models the endpoint lists; any name
may be typed, and an empty one goes back to the `:model' setting."
  (interactive (list (agent-lsp--read-model (agent-lsp--ensure-server))))
  (let ((server (agent-lsp--ensure-server)))
    (if (string-empty-p (string-trim (or model "")))
        (progn (remhash server agent-lsp--models)
               (message "agent-lsp: the next runs use the model of the settings"))
      (puthash server (string-trim model) agent-lsp--models)
      (message "agent-lsp: the next runs use the model %s" (string-trim model)))
    (gethash server agent-lsp--models)))


;;; Health check

(defun agent-lsp--check (level what &optional detail)
  "One health-check finding: LEVEL (ok, info, warn, fail), WHAT, DETAIL."
  (list :level level :what what :detail detail))

(defun agent-lsp--eglot-version ()
  "The version of the Eglot in use, or \"?\"."
  (or (ignore-errors
        (with-temp-buffer
          (insert-file-contents (find-library-name "eglot"))
          (lm-version)))
      "?"))

(defun agent-lsp--check-program ()
  "A finding about the server program, and whether it can start."
  (let* ((command (default-value 'agent-lsp-server-command))
         (program (car-safe command))
         (found (and (stringp program)
                     (or (executable-find program)
                         (let ((path (expand-file-name program)))
                           (and (file-executable-p path) path))))))
    (if found
        (agent-lsp--check 'ok "server program" found)
      (agent-lsp--check
       'fail "server program"
       (format "%S is not found: install the server with \
\"pipx install .\" in a clone of agent-lsp (not on PyPI yet; \
once published: \"pipx install agent-lsp-server\"), \
or set `agent-lsp-server-command'" program)))))

(defun agent-lsp--check-server (server)
  "The server's own checks (`agentLsp.health', those `agent-lsp doctor' prints).
The model checked is the one SERVER's next runs use (picked with
`agent-lsp-pick-model'), else the setting's."
  (let* ((picked (gethash server agent-lsp--models))
         (answer (agent-lsp--call server "agentLsp.health"
                                  (and picked (list :model picked)))))
    (mapcar (lambda (check)
              (let ((ok (eq (plist-get check :ok) t))
                    (name (plist-get check :name)))
                (agent-lsp--check
                 (if ok 'ok 'fail) name
                 (if (or ok (not (equal name "model")))
                     (plist-get check :detail)
                   (concat (plist-get check :detail)
                           " (in `agent-lsp-settings', or M-x agent-lsp-pick-model)")))))
            (append (plist-get answer :checks) nil))))

(defun agent-lsp--code-intel-health (server)
  "The health-check finding about code intelligence for SERVER."
  (let ((others (mapcar #'jsonrpc-name (agent-lsp--project-servers server))))
    (if (agent-lsp--beside-p server)
        (agent-lsp--check
         'ok "code intelligence"
         (format "codeIntel advertised: agent-lsp runs beside %s, which answers the agent's \
code-intel requests"
                 (if others (string-join others ", ")
                   "your language servers (none running now)")))
      (agent-lsp--check
       'info "code intelligence"
       "agent-lsp manages these buffers itself: the language servers it starts answer"))))

(defun agent-lsp--health-findings ()
  "Every health-check finding for the current buffer's project."
  (let ((program (agent-lsp--check-program))
        (base (agent-lsp--check 'info "Emacs and Eglot"
                                (format "Emacs %s, Eglot %s" emacs-version
                                        (agent-lsp--eglot-version)))))
    (if (eq (plist-get program :level) 'fail)
        (list base program)
      (let ((server (condition-case err (agent-lsp--ensure-server)
                      (error (error-message-string err)))))
        (if (stringp server)
            (list base program (agent-lsp--check 'fail "server" server))
          (let ((info (eglot--server-info server)))
            (append
             (list base program
                   (agent-lsp--check 'ok "server"
                                     (format "%s %s running"
                                             (or (plist-get info :name) "agent-lsp")
                                             (or (plist-get info :version) ""))))
             (condition-case err (agent-lsp--check-server server)
               (error (list (agent-lsp--check 'fail "server checks"
                                              (error-message-string err)))))
             (list (agent-lsp--check
                    'info "diagnostics"
                    "the agent sees Flymake's diagnostics (agentLsp/diagnostics)")
                   (agent-lsp--code-intel-health server)))))))))

(defun agent-lsp--show-health (findings)
  "Show FINDINGS in the *agent-lsp health* buffer."
  (with-current-buffer (get-buffer-create "*agent-lsp health*")
    (let ((inhibit-read-only t))
      (erase-buffer)
      (insert (propertize "agent-lsp health check\n\n" 'face 'bold))
      (dolist (f findings)
        (let ((level (plist-get f :level)))
          (insert (propertize (format "%-5s" (upcase (symbol-name level)))
                              'face (pcase level
                                      ('fail 'error) ('warn 'warning)
                                      ('ok 'success) (_ 'shadow)))
                  (format " %s: %s\n" (plist-get f :what)
                          (or (plist-get f :detail) "")))))
      (special-mode))
    (display-buffer (current-buffer))))

;;;###autoload
(defun agent-lsp-check-health ()
  "Check what an agent run needs and say precisely what is wrong.
The server program and the server, then the server's own checks
\(`agentLsp.health', as `agent-lsp doctor'): the settings file, the API
key, the model endpoint (no key, an unreachable URL, an HTTP error), the
model (offered by the endpoint or not), ripgrep, the sandbox and the MCP
servers.  The findings go
to the *agent-lsp health* buffer; returns them, a list of plists
\(:level ok|info|warn|fail :what :detail)."
  (interactive)
  (let* ((findings (agent-lsp--health-findings))
         (problems (seq-filter (lambda (f) (memq (plist-get f :level) '(fail warn)))
                               findings)))
    (agent-lsp--show-health findings)
    (message "agent-lsp health: %s"
             (if problems
                 (mapconcat (lambda (f) (format "%s: %s" (plist-get f :what)
                                                (plist-get f :detail)))
                            problems "; ")
               "all good"))
    findings))

;;; Setup

(defconst agent-lsp--setup-groups
  '((:rules . "Permission rules") (:hooks . "Hooks") (:skills . "Skills")
    (:commands . "Commands") (:agents . "Agents") (:memoryFiles . "Memory files")
    (:languageServers . "Language servers") (:mcpServers . "MCP servers")
    (:ignored . "Not read from Claude Code's files"))
  "The groups of an `agentLsp.setup' answer, in the order shown.")

(defun agent-lsp--setup-line (key row)
  "A readable line for ROW of the `agentLsp.setup' group KEY."
  (let ((get (lambda (k) (or (plist-get row k) ""))))
    (pcase key
      (:rules (format "%-13s %s %s  (%s: %s)%s" (funcall get :state) (funcall get :effect)
                      (funcall get :rule) (funcall get :scope) (funcall get :source)
                      (if (plist-get row :why) (format " (%s)" (plist-get row :why)) "")))
      (:hooks (format "%-13s %s%s: %s  (%s: %s)" (funcall get :state) (funcall get :event)
                      (if (string-empty-p (funcall get :matcher)) ""
                        (format " [%s]" (funcall get :matcher)))
                      (funcall get :command) (funcall get :scope) (funcall get :source)))
      ((or :skills :commands :agents)
       (format "%s: %s  (%s: %s)" (funcall get :name)
               (cond ((plist-get row :error) (concat "not used: " (plist-get row :error)))
                     ((string-empty-p (funcall get :description)) "-")
                     (t (funcall get :description)))
               (funcall get :scope) (funcall get :path)))
      (:memoryFiles (format "%-13s %s" (if (eq (plist-get row :present) t) "present" "absent")
                            (funcall get :path)))
      (:languageServers
       (let ((command (append (plist-get row :command) nil)))
         (format "%-13s %s (%s)%s" (funcall get :state) (funcall get :name) (funcall get :source)
                 (if command (concat ": " (string-join command " ")) ""))))
      (:mcpServers (format "%-13s %s (%s)%s" (funcall get :state) (funcall get :name)
                           (funcall get :source)
                           (if (plist-get row :error) (concat ": " (plist-get row :error)) "")))
      (:ignored (format "%s: %s" (funcall get :path) (funcall get :key))))))

(defun agent-lsp--show-setup (setup)
  "Show SETUP, an `agentLsp.setup' answer, in the *agent-lsp setup* buffer."
  (with-current-buffer (get-buffer-create "*agent-lsp setup*")
    (let ((inhibit-read-only t))
      (erase-buffer)
      (insert (propertize "agent-lsp: your setup (what the server found, and from where)\n\n"
                          'face 'bold))
      (pcase-dolist (`(,key . ,title) agent-lsp--setup-groups)
        (let ((rows (append (plist-get setup key) nil)))
          (insert (propertize title 'face 'bold) (if rows ":\n" ": none\n"))
          (dolist (row rows)
            (insert "  " (agent-lsp--setup-line key row) "\n"))))
      (let ((problems (append (plist-get setup :problems) nil)))
        (insert (propertize "Problems" 'face 'bold) (if problems ":\n" ": none\n"))
        (dolist (p problems)
          (insert "  " (propertize "FAIL" 'face 'error) " "
                  (if (string-empty-p (or (plist-get p :path) "")) ""
                    (concat (plist-get p :path) ": "))
                  (or (plist-get p :error) "") "\n")))
      (special-mode))
    (display-buffer (current-buffer))))

;;;###autoload
(defun agent-lsp-setup ()
  "Show what the server found of your setup, and from where (`agentLsp.setup').
Permission rules, hooks (with their state: active, needs-consent,
denied, ignored), skills, commands, agents, memory files, language
servers, MCP servers, the keys of Claude Code's files not read, and the
malformed files with their error.  Nothing is started to find them.
Shown in the *agent-lsp setup* buffer; returns the answer (a plist)."
  (interactive)
  (let* ((server (agent-lsp--ensure-server))
         (setup (agent-lsp--call server "agentLsp.setup"))
         (problems (append (plist-get setup :problems) nil)))
    (agent-lsp--show-setup setup)
    (message "agent-lsp setup: %s"
             (if problems
                 (mapconcat (lambda (p) (format "%s: %s" (plist-get p :path) (plist-get p :error)))
                            problems "; ")
               "no malformed file"))
    setup))

(provide 'agent-lsp-health)
;;; agent-lsp-health.el ends here
