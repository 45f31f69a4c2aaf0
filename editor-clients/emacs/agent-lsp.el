;;; agent-lsp.el --- Eglot client for the agent-lsp coding agent -*- lexical-binding: t; -*-

;; Version: 0.2.0
;; Package-Requires: ((emacs "28.1") (eglot "1.9"))
;; Keywords: tools, languages, convenience

;; This file is not part of GNU Emacs.

;;; Commentary:

;; agent-lsp serves an LLM coding agent over the Language Server
;; Protocol.  This package connects Emacs to it through Eglot (Emacs >=
;; 28 with Eglot >= 1.9, as Debian 12 ships; the Eglot of Emacs 29 and
;; 30 too):
;;
;; - `agent-lsp-start' starts the server for the current project (the
;;   commands below start it when needed); `agent-lsp-eglot-contact' is
;;   the same server as an entry for `eglot-server-programs';
;; - `agent-lsp-run' reads a task in the minibuffer and starts a run on
;;   the current file; the next run continues the same conversation
;;   (with \\[universal-argument], a new one starts);
;; - `agent-lsp-plan' asks for a plan only (read-only tools), and
;;   `agent-lsp-carry-out-plan' then has the agent carry it out;
;; - `agent-lsp-ask-region' asks a question about the region, whose LSP
;;   range goes along;
;; - `agent-lsp-cancel' cancels the newest running run (asks which one
;;   when several run);
;; - `agent-lsp-rewind' puts back the files a run changed;
;;   `agent-lsp-sessions' resumes a past session; `agent-lsp-pick-model'
;;   picks the model of the next runs; `agent-lsp-check-health' checks
;;   the setup, the model endpoint included; `agent-lsp-setup' shows
;;   the hooks, rules, skills, commands and agents the server found;
;; - `agent-lsp-chat' shows the session as a conversation: C-c C-c
;;   sends a follow-up (a steer while a run of it runs), approvals
;;   are answered there with buttons and keys, `agent-lsp-fork' forks
;;   at a past prompt, `agent-lsp-chat-stop' cancels the queued runs,
;;   then the running one;
;; - every run's `agentLsp/stream' output is shown live in the
;;   *agent-lsp* buffer, and the running run's status, context fill and
;;   cost in the mode line;
;; - approvals (`window/showMessageRequest' with Allow, Allow for
;;   session, Always allow when offered, Deny) are asked with `completing-read', an edit's diff
;;   shown meanwhile, and always answered: \\[keyboard-quit] is a denial;
;;   after Deny, an optional reason goes back to the agent;
;; - the agent's edits (`workspace/applyEdit') are applied without
;;   Eglot's y/n question (the agent asked its own approval) and the
;;   edited buffers are saved;
;; - the agent sees Flymake's diagnostics (`agentLsp/diagnostics');
;; - beside your language server, the agent's code-intel tools (find
;;   references, rename, ...) ask it (`agentLsp/codeIntel').
;;
;; The server's settings go in `agent-lsp-settings', e.g.
;;
;;   (setq agent-lsp-settings
;;         '(:model "gpt-4.1-mini" :approval (:default "ask")))

;;; Code:

(require 'agent-lsp-base)
(require 'agent-lsp-rpc)
(require 'agent-lsp-stream)
(require 'agent-lsp-review)
(require 'agent-lsp-diagnostics)
(require 'agent-lsp-code-intel)
(require 'agent-lsp-history)
(require 'agent-lsp-health)
(require 'agent-lsp-chat)


;;; Runs

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

(defun agent-lsp--send-run (server args &optional title retrying on-reply)
  "Start a run on SERVER with ARGS, the `agentLsp.run' argument plist.
TITLE names the run in the stream buffer.  The server's last session
continues unless ARGS has `:sessionId' (nil: a new session).  RETRYING
is set on the retry without a session the server forgot (a restart).
ON-REPLY, when given, is called with the reply (the chat's runs): the
stream buffer is then not displayed, and a queued run (`:queued') is
not tracked until it starts."
  (let* ((title (agent-lsp--one-line (or title (plist-get args :prompt)) 72))
         (model (gethash server agent-lsp--models))
         (args (cond ((plist-get args :sessionId) args)
                     ((plist-member args :sessionId)
                      (agent-lsp--plist-without args :sessionId))
                     ((agent-lsp--reusable-session server)
                      (append args (list :sessionId
                                         (agent-lsp--reusable-session server))))
                     (t args)))
         (args (if (and model (not (plist-get args :model)))
                   (append args (list :model model))
                 args)))
    (agent-lsp--flush-changes server)
    (agent-lsp--command
     server "agentLsp.run" args
     (lambda (result)
       (let* ((id (plist-get result :runId))
              (session (plist-get result :sessionId))
              (queued (eq (plist-get result :queued) t))
              (run (and (stringp id) (not queued)
                        (agent-lsp--ensure-run server id))))
         (cond
          (queued (when session (puthash server session agent-lsp--sessions))
                  (when on-reply (funcall on-reply result)))
          ((not run)
           (message "agent-lsp: unexpected answer to agentLsp.run: %S" result)
           (when on-reply (funcall on-reply nil)))
          (t
           (setf (agent-lsp--run-session run) session
                 (agent-lsp--run-title run) title
                 (agent-lsp--run-mode run) (plist-get args :mode))
           (when session (puthash server session agent-lsp--sessions))
           (agent-lsp--stream-header run)
           (when (and agent-lsp-display-stream (not on-reply))
             (agent-lsp--display-stream))
           (force-mode-line-update t)
           (message "agent-lsp: %s %s started: %s"
                    (if (plist-get args :mode) "plan" "run") id title)
           (when on-reply (funcall on-reply result))))))
     (lambda (msg)
       (cond
        ((or retrying (not (plist-get args :sessionId))
             (not (string-match-p "unknown sessionId\\|still running" msg)))
         (message "agent-lsp: the run was refused: %s" msg)
         (when on-reply (funcall on-reply nil)))
        (t
         ;; the session is gone (pruned, or of another workspace), or
         ;; a run started a moment ago still uses it: a new session
         (message "agent-lsp: %s; starting a new session" msg)
         (when (string-match-p "unknown sessionId" msg)
           (remhash server agent-lsp--sessions))
         (agent-lsp--send-run
          server (plist-put (copy-sequence args) :sessionId nil) title t
          on-reply)))))))

(defun agent-lsp--text-document ()
  "The current buffer's TextDocumentIdentifier, nil if it visits no file."
  (when buffer-file-name
    (list :uri (agent-lsp--path-to-uri buffer-file-name))))

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

;;;###autoload
(defun agent-lsp-plan (prompt &optional new-session)
  "Ask the agent for a plan for PROMPT, about the current file.
The agent only reads (files, search, diagnostics) and answers with a
numbered plan; \\[agent-lsp-carry-out-plan] then has it carried out in
the same session.  NEW-SESSION (interactively, \\[universal-argument])
starts a new session."
  (interactive
   (list (read-string (if current-prefix-arg "Plan (new session): " "Plan: ")
                      nil 'agent-lsp--history)
         current-prefix-arg))
  (when (string-empty-p (string-trim prompt))
    (user-error "agent-lsp: empty task"))
  (let ((server (agent-lsp--ensure-server))
        (doc (agent-lsp--text-document)))
    (agent-lsp--send-run server
                         `(:prompt ,prompt :mode "plan"
                                   ,@(and doc `(:textDocument ,doc))
                                   ,@(and new-session '(:sessionId nil))))))

(defun agent-lsp--last-plan ()
  "The newest plan of this Emacs session that finished (`done'), or nil."
  (seq-find (lambda (run)
              (and (equal (agent-lsp--run-mode run) "plan")
                   (equal (agent-lsp--run-stop run) "done")
                   (agent-lsp--run-session run)
                   (jsonrpc-running-p (agent-lsp--run-server run))))
            agent-lsp--runs))

;;;###autoload
(defun agent-lsp-carry-out-plan ()
  "Have the agent carry out the newest finished plan, with every tool.
A follow-up run in the plan's session: the agent has the plan before it.
The server words the follow-up (`carryOutPlan')."
  (interactive)
  (let ((plan (or (agent-lsp--last-plan)
                  (user-error "agent-lsp: no finished plan; M-x agent-lsp-plan \
makes one"))))
    (agent-lsp--send-run (agent-lsp--run-server plan)
                         (list :carryOutPlan t
                               :sessionId (agent-lsp--run-session plan))
                         (format "Carry out the plan of %s"
                                 (agent-lsp--run-id plan)))))

(defun agent-lsp-region-range (beg end &optional server)
  "The LSP range of BEG..END in SERVER's position encoding.
0-based lines; columns in the encoding that SERVER (default: the
current buffer's agent-lsp server) chose, UTF-16 unless it said otherwise."
  (let ((encoding (agent-lsp--position-encoding (or server (agent-lsp--server)))))
    (list :start (agent-lsp--lsp-position beg encoding)
          :end (agent-lsp--lsp-position end encoding))))

;;;###autoload
(defun agent-lsp-ask-region (beg end question &optional new-session)
  "Ask the agent QUESTION about the region from BEG to END.
The question and the region's LSP range go along; the server quotes the
region's text (as Eglot has sent it) in the prompt.  Outside a file, the
question goes alone.
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
         (range (agent-lsp-region-range beg end server)))
    (deactivate-mark)
    (agent-lsp--send-run
     server
     `(,@(if doc `(:question ,question :textDocument ,doc :range ,range)
           `(:prompt ,question))
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
    ;; Decision 74: the session's queued runs first (newest first)
    (agent-lsp-chat--cancel-queued (agent-lsp--run-server run)
                                   (agent-lsp--run-session run))
    (agent-lsp--command
     (agent-lsp--run-server run) "agentLsp.cancel" (list :runId run-id)
     (lambda (result)
       (message (if (eq result t) "agent-lsp: cancelling run %s"
                  "agent-lsp: run %s had already finished")
                run-id)))))

;;;###autoload
(defun agent-lsp-processes ()
  "List the runs' running background processes; the one chosen is stopped.
The agent starts them with `run_command' and `background: true'; the
run's end stops the rest (`agentLsp.stopProcess')."
  (interactive)
  (let* ((running (or (agent-lsp-running-processes)
                      (user-error "agent-lsp: no background process is running")))
         (choices (mapcar (lambda (p)
                            (cons (format "%s  %s  (run %s)" (plist-get p :id)
                                          (agent-lsp--one-line
                                           (plist-get p :command) 80)
                                          (plist-get p :run))
                                  p))
                          running))
         (choice (completing-read "Stop which background process? " choices
                                  nil t nil nil (caar choices)))
         (process (or (cdr (assoc choice choices)) (car running)))
         (id (plist-get process :id)))
    (agent-lsp--command
     (plist-get process :server) "agentLsp.stopProcess"
     (list :runId (plist-get process :run) :processId id)
     (lambda (result)
       (if (eq result t) (message "agent-lsp: stopped %s" id)
         (message "agent-lsp: %s was no longer running" id))))))

(defun agent-lsp-new-session ()
  "Forget the conversation, so that the next run starts a new session."
  (interactive)
  (let ((server (agent-lsp--server)))
    (when server (remhash server agent-lsp--sessions))
    (message "agent-lsp: the next run starts a new session")))

;;; Code actions

(defun agent-lsp--code-action-run (server arguments)
  "Start a code action's `agentLsp.run' with ARGUMENTS on SERVER.
\"Ask agent about selection\" (`ask: true') asks for the question first,
sent as `question' with the action's range (the server words the prompt);
code-action runs are tracked like the others."
  (let* ((args (agent-lsp--plist-without (copy-sequence (elt arguments 0)) :ask))
         (title nil))
    (when (eq (plist-get (elt arguments 0) :ask) t)
      (let ((question (read-string "Ask the agent about the selection: "
                                   nil 'agent-lsp--history)))
        (when (string-empty-p (string-trim question))
          (user-error "agent-lsp: empty question"))
        (setq title question
              args (append (agent-lsp--plist-without
                            (agent-lsp--plist-without args :prompt)
                            :selectionInPrompt)
                           (list :question question)))))
    (agent-lsp--send-run server args title)))

(defun agent-lsp--execute (server command arguments)
  "Run our code action's COMMAND with ARGUMENTS on SERVER; nil if not ours.
\"Agent: rewind last run (N files)\" is `agent-lsp-rewind', which says
what was restored and offers to force."
  (pcase (format "%s" command)
    ("agentLsp.run" (agent-lsp--code-action-run server arguments) t)
    ("agentLsp.rewind" (agent-lsp-rewind (plist-get (elt arguments 0) :runId)) t)))

;; Eglot <= 1.15 (Emacs 28, 29) runs a code action's command here...
(cl-defmethod eglot-execute-command ((server agent-lsp-server) command arguments)
  "Run COMMAND with ARGUMENTS on SERVER: ours here, others on the server."
  (unless (agent-lsp--execute server command arguments)
    (cl-call-next-method)))

;; ...and Eglot >= 1.16 (Emacs 30) here, with the Command or CodeAction.
(cl-defmethod eglot-execute :around ((server agent-lsp-server) action)
  "Run ACTION on SERVER: our commands here, the rest as Eglot does."
  (let* ((command (plist-get action :command))
         (inner (if (consp command) command action)))
    (unless (and (stringp (plist-get inner :command))
                 (not (plist-get action :edit))
                 (agent-lsp--execute server (plist-get inner :command)
                                     (plist-get inner :arguments)))
      (cl-call-next-method))))

(defun agent-lsp-unload-function ()
  "Remove the hooks and the mode-line entry of agent-lsp."
  (remove-hook 'eglot-server-initialized-hook #'agent-lsp--note-server)
  (remove-hook 'agent-lsp-stream-functions #'agent-lsp--keep-review)
  (setq mode-line-misc-info (delete agent-lsp--mode-line-entry
                                    mode-line-misc-info))
  nil)

(provide 'agent-lsp)
;;; agent-lsp.el ends here
