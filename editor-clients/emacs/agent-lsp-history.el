;;; agent-lsp-history.el --- Rewind a run, resume a past session, run a command (agent-lsp) -*- lexical-binding: t; -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; `agent-lsp-rewind' puts back the files a run of this Emacs session
;; changed (`agentLsp.rewind'); the server's edit lands in the buffers
;; like any agent edit, so `undo' can take it back too.
;; `agent-lsp-sessions' picks a past session of the project
;; (`agentLsp.sessions'): the next runs continue that conversation, even
;; one of an earlier server process.  `agent-lsp-command' runs one of
;; the user's prompt files (`agentLsp.commands') as `/name args'.  Load
;; `agent-lsp', not this file.

;;; Code:

(require 'agent-lsp-rpc)
(require 'agent-lsp-stream)


;;; Rewind

(defun agent-lsp--rewindable-runs ()
  "The runs of this Emacs session whose edits can be rewound, newest first."
  (seq-filter (lambda (run)
                (and (eq (plist-get (agent-lsp--run-report run) :rewindable) t)
                     (jsonrpc-running-p (agent-lsp--run-server run))))
              agent-lsp--runs))

(defun agent-lsp--files-label (server uris)
  "A short description of URIS, the files of a run on SERVER."
  (let* ((files (mapcar (lambda (u) (agent-lsp--relative u server))
                        (append uris nil)))
         (shown (string-join (seq-take files 3) ", ")))
    (format "%d file%s: %s%s" (length files) (if (= 1 (length files)) "" "s")
            shown (if (> (length files) 3) ", ..." ""))))

(defun agent-lsp--read-rewindable (prompt)
  "Read the id of a rewindable run with PROMPT, a question without colon.
The newest run is the default, named in the prompt: RET takes it."
  (let* ((runs (or (agent-lsp--rewindable-runs)
                   (user-error "agent-lsp: no run of this Emacs session can be \
rewound (the code action \"Agent: rewind last run\" rewinds the last run of \
the project)")))
         (choices
          (mapcar (lambda (run)
                    (cons (format "%s  %s  (%s)" (agent-lsp--run-id run)
                                  (or (agent-lsp--run-title run) "")
                                  (agent-lsp--files-label
                                   (agent-lsp--run-server run)
                                   (plist-get (agent-lsp--run-report run)
                                              :editedFiles)))
                          (agent-lsp--run-id run)))
                  runs))
         (newest (car runs))
         (choice (completing-read
                  (format-prompt prompt (format "%s, %s" (agent-lsp--run-id newest)
                                                (agent-lsp--one-line
                                                 (or (agent-lsp--run-title newest) "") 40)))
                  choices nil t nil nil (caar choices))))
    (or (cdr (assoc choice choices)) (cdar choices))))

(defun agent-lsp--rewind-summary (server result)
  "Lines saying what the rewind RESULT of SERVER did."
  (let ((restored (append (plist-get result :restored) nil))
        (conflicts (append (plist-get result :conflicts) nil))
        (lost (append (plist-get result :notRestorable) nil)))
    (delq nil
          (list
           (and restored
                (format "restored: %s"
                        (mapconcat (lambda (u) (agent-lsp--relative u server))
                                   restored ", ")))
           (and conflicts
                (format "changed since the run, left alone: %s"
                        (mapconcat (lambda (c)
                                     (format "%s (%s)"
                                             (agent-lsp--relative
                                              (plist-get c :uri) server)
                                             (plist-get c :reason)))
                                   conflicts "; ")))
           (and lost
                (format "not restorable: %s"
                        (mapconcat (lambda (c)
                                     (format "%s (%s)"
                                             (agent-lsp--relative
                                              (plist-get c :uri) server)
                                             (plist-get c :reason)))
                                   lost "; ")))))))

(defun agent-lsp--record-rewind (server run-id result)
  "Keep the rewind RESULT of RUN-ID on SERVER as a run that can be rewound.
Rewinding it puts the files back as the run left them."
  (let ((rewind-id (plist-get result :rewindId))
        (restored (plist-get result :restored)))
    (when (and (stringp rewind-id) (> (length restored) 0))
      (push (agent-lsp--make-run
             :id rewind-id :server server :stop "rewind"
             :title (format "the rewind of %s" run-id)
             :report (list :rewindable t :editedFiles restored))
            agent-lsp--runs))))

;;;###autoload
(defun agent-lsp-rewind (run-id &optional force)
  "Put back the files that the run RUN-ID changed, as they were before it.
Interactively, a choice among the runs of this Emacs session.  A file
changed since the run is left alone and listed, unless you confirm, or
FORCE (interactively, \\[universal-argument]).  Returns the server's
answer: (:rewindId :restored :conflicts :notRestorable)."
  (interactive (list (agent-lsp--read-rewindable "Rewind which agent run")
                     current-prefix-arg))
  (let* ((run (agent-lsp--find-run run-id))
         (server (if run (agent-lsp--run-server run) (agent-lsp--ensure-server)))
         (result (agent-lsp--call server "agentLsp.rewind"
                                  `(:runId ,run-id ,@(and force '(:force t)))))
         (lines (agent-lsp--rewind-summary server result))
         (conflicts (append (plist-get result :conflicts) nil)))
    (agent-lsp--record-rewind server run-id result)
    (agent-lsp--append-note
     (propertize (format "## rewind of %s%s" run-id
                         (if lines (concat "\n    " (string-join lines "\n    "))
                           ": nothing to restore"))
                 'face 'bold))
    (message "agent-lsp: rewind of %s: %s" run-id
             (if lines (string-join lines "; ") "nothing to restore"))
    (if (and conflicts (not force)
             (y-or-n-p (format "agent-lsp: %d file%s changed since run %s; \
rewind %s anyway (force)? "
                               (length conflicts)
                               (if (= 1 (length conflicts)) "" "s")
                               run-id
                               (if (= 1 (length conflicts)) "it" "them"))))
        (agent-lsp-rewind run-id t)
      result)))


;;; Sessions

(defun agent-lsp--session-label (session)
  "One line about SESSION, an `agentLsp.sessions' item."
  (format "%s  (%s, %d run%s, %s)"
          (agent-lsp--one-line (plist-get session :title) 60)
          (replace-regexp-in-string
           "T\\([0-9:]\\{5\\}\\).*" " \\1" (or (plist-get session :updated) ""))
          (or (plist-get session :runs) 0)
          (if (eql 1 (plist-get session :runs)) "" "s")
          (or (plist-get session :lastStop) "running")))

;;;###autoload
(defun agent-lsp-sessions ()
  "Resume a past session of this project: the next runs continue it.
The sessions come from the server (`agentLsp.sessions', newest first),
so a conversation of an earlier Emacs or server goes on, the agent
remembering it.  Returns the chosen sessionId."
  (interactive)
  (let* ((server (agent-lsp--ensure-server))
         (sessions (append (agent-lsp--call server "agentLsp.sessions") nil))
         (choices (or (mapcar (lambda (s) (cons (agent-lsp--session-label s) s))
                              sessions)
                      (user-error "agent-lsp: this project has no past session")))
         (choice (completing-read (format-prompt "Resume which agent session"
                                                 (agent-lsp--one-line
                                                  (plist-get (cdar choices) :title) 40))
                                  choices nil t nil nil (caar choices)))
         (session (cdr (assoc choice choices))))
    (puthash server (plist-get session :sessionId) agent-lsp--sessions)
    (message "agent-lsp: the next runs continue the session \"%s\""
             (agent-lsp--one-line (plist-get session :title) 60))
    (plist-get session :sessionId)))

;;; Commands (prompt files)

(defvar agent-lsp--history)
(declare-function agent-lsp-run "agent-lsp" (prompt &optional new-session))

(defun agent-lsp--command-label (item)
  "How the command ITEM of `agentLsp.commands' is offered."
  (let ((hint (plist-get item :argumentHint)))
    (format "/%s%s  %s (%s)"
            (plist-get item :name)
            (if (stringp hint) (concat " " hint) "")
            (agent-lsp--one-line (or (plist-get item :description) "") 60)
            (plist-get item :source))))

;;;###autoload
(defun agent-lsp-command (name arguments)
  "Run the prompt file NAME with ARGUMENTS: the prompt \"/NAME ARGUMENTS\".
A command of .claude/commands/ or .agents/commands/ (of the project or
the home folder; a subfolder is a namespace `ns:name') or a skill; the
server fills its `$ARGUMENTS' and `$1'...`$9'.  Interactively, a choice
among the server's commands (`agentLsp.commands'), then the arguments,
read with the command's argument hint as prompt."
  (interactive
   (let* ((server (agent-lsp--ensure-server))
          (items (append (agent-lsp--call server "agentLsp.commands") nil))
          (choices (or (mapcar (lambda (c) (cons (agent-lsp--command-label c) c)) items)
                       (user-error "agent-lsp: no commands: add prompt files to \
.claude/commands/ or ~/.claude/commands/")))
          (choice (completing-read "Run which agent command: " choices nil t))
          (item (cdr (assoc choice choices)))
          (hint (plist-get item :argumentHint)))
     (list (plist-get item :name)
           (read-string (format "/%s %s: " (plist-get item :name)
                                (if (stringp hint) hint "arguments"))
                        nil 'agent-lsp--history))))
  (let ((arguments (string-trim (or arguments ""))))
    (agent-lsp-run (concat "/" name (if (string-empty-p arguments) ""
                                      (concat " " arguments))))))

(provide 'agent-lsp-history)
;;; agent-lsp-history.el ends here
