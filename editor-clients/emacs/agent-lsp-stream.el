;;; agent-lsp-stream.el --- The *agent-lsp* buffer and the mode line of agent-lsp -*- lexical-binding: t; -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Every run's `agentLsp/stream' events: kept in the runs' state (status,
;; context fill and cost, the stop report), shown live in the stream
;; buffer, and summed up in the mode line.  Load `agent-lsp', not this
;; file.

;;; Code:

(require 'agent-lsp-rpc)

(defvar agent-lsp-stream-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "k") 'agent-lsp-cancel)
    (define-key map (kbd "C-c C-k") 'agent-lsp-cancel)
    (define-key map (kbd "r") 'agent-lsp-run)
    (define-key map (kbd "p") 'agent-lsp-plan)
    (define-key map (kbd "c") 'agent-lsp-carry-out-plan)
    (define-key map (kbd "n") 'agent-lsp-new-session)
    (define-key map (kbd "s") 'agent-lsp-sessions)
    (define-key map (kbd "m") 'agent-lsp-pick-model)
    (define-key map (kbd "w") 'agent-lsp-rewind)
    (define-key map (kbd "b") 'agent-lsp-processes)
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

(defun agent-lsp--append-note (text)
  "Append TEXT on lines of its own, as a note outside every run's output."
  (agent-lsp--append-lines text)
  (with-current-buffer (agent-lsp-stream-buffer)
    (setq agent-lsp--last-run nil)))

(defun agent-lsp--stream-header (run)
  "Write RUN's header line in the stream buffer, once."
  (with-current-buffer (agent-lsp-stream-buffer)
    (let ((id (agent-lsp--run-id run)))
      (unless (member id agent-lsp--headed)
        (push id agent-lsp--headed)
        (agent-lsp--append-lines
         (propertize (format "## %s %s%s"
                             (if (equal (agent-lsp--run-mode run) "plan")
                                 "plan" "run")
                             id
                             (if (agent-lsp--run-title run)
                                 (concat ": " (agent-lsp--run-title run))
                               ""))
                     'face 'bold))
        (setq agent-lsp--last-run id)))))

(defconst agent-lsp--shown-kinds
  '("text" "toolCall" "toolResult" "approval" "status" "compaction" "thinking"
    "hook" "steer" "process" "stop")
  "The stream kinds the stream buffer shows.
It ignores the others (a newer server's).")

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
    (propertize (format (if (equal kind "steer") "» %2$s" "[%s] %s") label
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
    ;; usage: the mode line shows it; a kind unknown here: nothing to show
    (when (member kind agent-lsp--shown-kinds)
      (with-current-buffer (agent-lsp-stream-buffer)
        (cond ((not (member id agent-lsp--headed))
               (agent-lsp--stream-header run))
              ((not (equal agent-lsp--last-run id))
               (agent-lsp--append-lines (format "[run %s]" id))
               (setq agent-lsp--last-run id)))
        (if (equal kind "text")
            (agent-lsp--append (or (plist-get ev :text) ""))
          (agent-lsp--append-lines (agent-lsp--format-event ev))
          (setq agent-lsp--last-run id))
        (when (equal kind "stop")
          (agent-lsp--after-stop-lines run ev)
          (setq agent-lsp--last-run nil))))))

(defun agent-lsp--after-stop-lines (run ev)
  "After RUN's stop event EV: what can follow (the stop line has the usage)."
  (let ((report (plist-get ev :report)))
    (when (and (equal (agent-lsp--run-mode run) "plan")
               (equal (plist-get report :stopReason) "done"))
      (agent-lsp--append-lines
       "    Plan ready: M-x agent-lsp-carry-out-plan (c here) carries it out."))
    (when (eq (plist-get report :rewindable) t)
      (agent-lsp--append-lines
       "    M-x agent-lsp-rewind (w here) puts back the files this run changed."))))

(defun agent-lsp--note-stop (run ev)
  "Keep RUN's stop event EV: its report, stop reason and session."
  (let ((report (plist-get ev :report)))
    (setf (agent-lsp--run-stop run) (or (plist-get report :stopReason) "stopped")
          (agent-lsp--run-report run) report
          (agent-lsp--run-status run) nil)
    (when (and (plist-get report :sessionId) (not (agent-lsp--run-session run)))
      (setf (agent-lsp--run-session run) (plist-get report :sessionId)))
    (message "agent-lsp: %s %s %s: %s"
             (if (equal (agent-lsp--run-mode run) "plan") "plan" "run")
             (agent-lsp--run-id run) (agent-lsp--run-stop run)
             (agent-lsp--one-line (or (plist-get report :summary)
                                      (plist-get ev :text))
                                  120))
    (run-hook-with-args 'agent-lsp-run-finished-functions
                        (agent-lsp--run-id run) report)))

;;; Background processes

(defvar agent-lsp--processes nil
  "The runs' background processes, newest first.
Each a plist (:run RUN-ID :server SERVER :id PROCESS-ID :command COMMAND
:state STATE :exitCode CODE), from the `process' stream events.")

(defun agent-lsp--find-process (run-id process-id)
  "The background process PROCESS-ID of the run RUN-ID, or nil."
  (seq-find (lambda (p) (and (equal (plist-get p :run) run-id)
                             (equal (plist-get p :id) process-id)))
            agent-lsp--processes))

(defun agent-lsp--note-process (server run-id ev)
  "Keep the `process' event EV of RUN-ID on SERVER."
  (let* ((process-id (plist-get ev :processId))
         (known (agent-lsp--find-process run-id process-id)))
    (when (stringp process-id)
      (unless known          ; every key present: plist-put then changes it in place
        (setq known (list :run run-id :server server :id process-id
                          :command "" :state nil :exitCode nil))
        (push known agent-lsp--processes))
      (plist-put known :command (or (plist-get ev :command) ""))
      (plist-put known :state (plist-get ev :state))
      (plist-put known :exitCode (plist-get ev :exitCode)))))

(defun agent-lsp--processes-ended (run-id)
  "The run RUN-ID stopped, and the server with it every process of it."
  (dolist (p agent-lsp--processes)
    (when (and (equal (plist-get p :run) run-id)
               (equal (plist-get p :state) "running"))
      (plist-put p :state "stopped"))))

(defun agent-lsp-running-processes ()
  "The background processes still running, newest first."
  (seq-filter (lambda (p) (and (equal (plist-get p :state) "running")
                               (jsonrpc-running-p (plist-get p :server))))
              agent-lsp--processes))

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
          ;; contextTokens describe the main agent's requests only
          ("usage" (when (member (plist-get ev :agentId) '(nil "main"))
                     (setf (agent-lsp--run-usage run) (plist-get ev :text))))
          ("process" (agent-lsp--note-process server id ev))
          ("stop" (agent-lsp--note-stop run ev)
                  (agent-lsp--processes-ended id)))
        (agent-lsp--render run ev)
        (force-mode-line-update t)))
    (run-hook-with-args 'agent-lsp-stream-functions server ev)))

(cl-defmethod eglot-handle-notification
  (server (_method (eql agentLsp/stream)) &rest params)
  "Show PARAMS, an `agentLsp/stream' event from SERVER."
  (agent-lsp--handle-stream server params))


;;; Mode line

(defun agent-lsp-mode-line-string ()
  "Return the mode-line text about the running runs (\"\" if none).
The newest run's context fill and cost (first: a narrow window cuts
the end), then its status:
  agent: ctx 31k/128k · $0.012 · turn 2: edit a.py
\(`$0.012 of $1.00' when the run has a budget)."
  (let ((running (seq-filter #'agent-lsp--run-running-p agent-lsp--runs)))
    (if (null running) ""
      (let ((usage (agent-lsp--run-usage (car running))))
        (concat (propertize (if (cdr running)
                                (format "agent[%d]" (length running))
                              "agent")
                            'face 'bold)
                ": "
                (if usage (concat usage " · ") "")
                (agent-lsp--one-line
                 (or (agent-lsp--run-status (car running)) "starting")
                 agent-lsp-mode-line-max-width))))))

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

(provide 'agent-lsp-stream)
;;; agent-lsp-stream.el ends here
