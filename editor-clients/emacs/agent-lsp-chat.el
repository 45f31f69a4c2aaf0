;;; agent-lsp-chat.el --- The conversation buffer of agent-lsp -*- lexical-binding: t; -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; `agent-lsp-chat' shows one session as a conversation: the prompts as
;; headings, the model's text as it streams, tool calls and thinking as
;; buttons that fold their details, approvals inline with buttons (and
;; the keys a, s, w, d, D on them), and the input at the end of the
;; buffer.  \\[agent-lsp-chat-send] sends it: a follow-up in the same
;; session, or, while a run of the chat runs, a steer of that run.
;; \\[agent-lsp-chat-queue] queues it instead; `agent-lsp-fork' on a
;; past prompt starts a new session from before it, the prompt in the
;; input; `agent-lsp-chat-stop' cancels the queued runs (newest first),
;; then the running one.  A resumed session shows its history as it was
;; seen live.  Load `agent-lsp', not this file.

;;; Code:

(require 'button)
(require 'agent-lsp-stream)
(require 'agent-lsp-review)

(declare-function agent-lsp--send-run "agent-lsp"
                  (server args &optional title retrying on-reply))
(declare-function agent-lsp-cancel "agent-lsp" (run-id))

(defcustom agent-lsp-chat-buffer-name "*agent-lsp chat*"
  "Name of the conversation buffer."
  :type 'string
  :group 'agent-lsp)

(defvar-local agent-lsp-chat--server nil "The server of the chat.")
(defvar-local agent-lsp-chat--session nil "The session the chat shows.")
(defvar-local agent-lsp-chat--current nil "The chat's run that runs, or nil.")
(defvar-local agent-lsp-chat--awaiting 0 "Replies to `agentLsp.run' still to come.")
(defvar-local agent-lsp-chat--shown nil "Ids of the runs the chat shows.")
(defvar-local agent-lsp-chat--early nil
  "Alist: run id -> its events that came before the run's reply (newest first).")
(defvar-local agent-lsp-chat--queued nil
  "Queued prompts, oldest first: plists (:runId :session :prompt :marker :state).")
(defvar-local agent-lsp-chat--approvals nil
  "Hash: approval key -> marker at the start of its buttons line.")
(defvar-local agent-lsp-chat--seq nil "Hash: run id -> the last `seq' shown.")
(defvar-local agent-lsp-chat--end nil "Marker: the end of the conversation.")
(defvar-local agent-lsp-chat--input nil "Marker: the start of the input.")
(defvar-local agent-lsp-chat--folds 0 "Folded sections so far.")

(defvar-local agent-lsp-chat--loading nil
  "While a history loads: the live events that came meanwhile, newest first.
The symbol `none' when none came.")

(defvar agent-lsp-chat--live (make-hash-table :test #'equal)
  "Run id -> its stream events while it runs, newest first (a chat opened
mid-run shows them: the history may hold text the stream has not sent).")

(defvar agent-lsp-chat--held (make-hash-table :test #'equal)
  "Approval key -> (SERVER ID ACTIONS): requests the chat answers.")

(defconst agent-lsp-chat--titles
  '((?a "Allow" "allow") (?s "Allow for session" "allowSession")
    (?w "Always allow" "allowAlways") (?d "Deny" "deny"))
  "Approval keys: (KEY TITLE DECISION).")


;;; The buffer

(defvar agent-lsp-chat-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "C-c C-c") #'agent-lsp-chat-send)
    (define-key map (kbd "C-c C-q") #'agent-lsp-chat-queue)
    (define-key map (kbd "C-c C-k") #'agent-lsp-chat-stop)
    (define-key map (kbd "C-c C-f") #'agent-lsp-fork)
    map)
  "Keymap of `agent-lsp-chat-mode'.")

(defalias 'agent-lsp-chat--parent-mode
  (if (fboundp 'markdown-mode) 'markdown-mode 'text-mode)
  "The chat's parent mode: `markdown-mode' when installed, else `text-mode'.")

(define-derived-mode agent-lsp-chat-mode agent-lsp-chat--parent-mode "Agent-Chat"
  "Major mode of the agent-lsp conversation buffer; type at its end.
\\{agent-lsp-chat-mode-map}"
  (setq-local word-wrap t)
  (setq buffer-undo-list t)
  (setq-local header-line-format
              (substitute-command-keys
               "agent-lsp chat: type at the end; \\[agent-lsp-chat-send] sends \
\(steers while a run runs), \\[agent-lsp-chat-stop] stops")))

(defun agent-lsp-chat--buffer ()
  "The chat buffer, or nil."
  (get-buffer agent-lsp-chat-buffer-name))

(defun agent-lsp-chat--reset ()
  "Empty the conversation and forget its runs (the input stays)."
  (let ((inhibit-read-only t)
        (input (and agent-lsp-chat--input
                    (buffer-substring agent-lsp-chat--input (point-max)))))
    (erase-buffer)
    (setq agent-lsp-chat--current nil agent-lsp-chat--awaiting 0
          agent-lsp-chat--loading nil
          agent-lsp-chat--shown nil agent-lsp-chat--early nil
          agent-lsp-chat--queued nil
          agent-lsp-chat--approvals (make-hash-table :test #'equal)
          agent-lsp-chat--seq (make-hash-table :test #'equal))
    (insert (propertize "\n─── your message (C-c C-c sends) ───\n"
                        'read-only t 'face 'shadow 'rear-nonsticky t))
    ;; before the line above; it advances over what is inserted at it,
    ;; other markers there (a window's start) stay
    (setq agent-lsp-chat--end (copy-marker (point-min) t))
    (setq agent-lsp-chat--input (point-marker))
    (insert (or input ""))))

(defun agent-lsp-chat--ensure-buffer ()
  "The chat buffer, created when needed."
  (or (agent-lsp-chat--buffer)
      (with-current-buffer (get-buffer-create agent-lsp-chat-buffer-name)
        (agent-lsp-chat-mode)
        (agent-lsp-chat--reset)
        (current-buffer))))

(defun agent-lsp-chat--insert (text &rest props)
  "Insert TEXT (with PROPS) at the end of the conversation."
  (with-current-buffer (agent-lsp-chat--ensure-buffer)
    (let ((inhibit-read-only t))
      (save-excursion
        (goto-char agent-lsp-chat--end)
        (insert (apply #'propertize text 'read-only t 'front-sticky '(read-only)
                       props))))))

(defun agent-lsp-chat--lines (text &rest props)
  "Insert TEXT (with PROPS) on lines of its own; return where it starts."
  (with-current-buffer (agent-lsp-chat--ensure-buffer)
    (unless (memq (char-before agent-lsp-chat--end) '(nil ?\n))
      (agent-lsp-chat--insert "\n"))
    (let ((start (marker-position agent-lsp-chat--end)))
      (apply #'agent-lsp-chat--insert (concat text "\n") props)
      start)))

(defun agent-lsp-chat--indent (text)
  "TEXT without its trailing newlines, each line indented."
  (concat "    " (replace-regexp-in-string
                  "\n" "\n    " (string-trim-right (or text "") "\n+"))))


;;; Folded sections, approvals

(defun agent-lsp-chat--toggle (button)
  "Show or hide the section BUTTON heads."
  (let ((spec (button-get button 'agent-lsp-fold)))
    (if (memq spec buffer-invisibility-spec)
        (remove-from-invisibility-spec spec)
      (add-to-invisibility-spec spec))))

(defun agent-lsp-chat--fold (heading body)
  "Insert HEADING as a button that folds BODY (hidden at first)."
  (with-current-buffer (agent-lsp-chat--ensure-buffer)
    (let* ((spec (intern (format "agent-lsp-chat-%d"
                                 (cl-incf agent-lsp-chat--folds))))
           (text (with-temp-buffer
                   (insert-text-button heading 'action #'agent-lsp-chat--toggle
                                       'follow-link t 'agent-lsp-fold spec)
                   (buffer-string))))
      (add-to-invisibility-spec spec)
      (agent-lsp-chat--lines text)
      (unless (string-empty-p (string-trim (or body "")))
        (agent-lsp-chat--lines (agent-lsp-chat--indent body) 'invisible spec)))))

(defun agent-lsp-chat--approval-at-point ()
  "The key of the waiting approval at point, else the newest waiting one."
  (or (get-text-property (point) 'agent-lsp-approval)
      (let (newest)
        (maphash (lambda (key _) (setq newest key)) agent-lsp-chat--approvals)
        newest)
      (user-error "agent-lsp: no approval is waiting")))

(defun agent-lsp-chat--answer (key title &optional reason)
  "Answer the approval KEY with the action TITLE (and REASON after Deny)."
  (let* ((held (gethash key agent-lsp-chat--held))
         (ids (split-string key " "))
         (decision (nth 2 (seq-find (lambda (k) (equal (nth 1 k) title))
                                    agent-lsp-chat--titles))))
    (if held
        (pcase-let ((`(,server ,id ,actions) held))
          (if (not (seq-find (lambda (a) (equal (plist-get a :title) title))
                             actions))
              (message "agent-lsp: \"%s\" is not offered for this call" title)
            (remhash key agent-lsp-chat--held)
            (agent-lsp--send-answer
             server id (append (list :title title :runId (car ids)
                                     :callId (cadr ids))
                               (and reason (list :reason reason))))))
      (agent-lsp--command
       agent-lsp-chat--server "agentLsp.approve"
       (append (list :runId (car ids) :callId (cadr ids) :decision decision)
               (and reason (list :reason reason)))
       (lambda (ok)
         (unless (eq ok t)
           (message "agent-lsp: \"%s\" was not taken for this call" title)))))))

(defun agent-lsp-chat--reason ()
  "The reason of a denial, when `agent-lsp-ask-deny-reason' asks for one."
  (and agent-lsp-ask-deny-reason (agent-lsp--read-reason)))

(defun agent-lsp-chat-approval-key ()
  "Answer the approval at point by the key typed: a, s, w, d or D."
  (interactive)
  (let* ((key (agent-lsp-chat--approval-at-point))
         (char last-command-event)
         (entry (assq char agent-lsp-chat--titles)))
    (cond
     ((eq char ?D)
      (let ((review (gethash key agent-lsp--reviews)))
        (if review (agent-lsp--show-diff agent-lsp-chat--server review)
          (message "agent-lsp: this approval has no diff"))))
     ((eq char ?d)
      (agent-lsp-chat--answer key "Deny" (agent-lsp-chat--reason)))
     (entry (agent-lsp-chat--answer key (nth 1 entry))))))

(defvar agent-lsp-chat-approval-map
  (let ((map (make-sparse-keymap)))
    (set-keymap-parent map button-map)
    (dolist (key '("a" "s" "w" "d" "D"))
      (define-key map (kbd key) #'agent-lsp-chat-approval-key))
    map)
  "Keys on an inline approval.")

(define-button-type 'agent-lsp-chat-approval
  'keymap agent-lsp-chat-approval-map
  'follow-link t)

(defun agent-lsp-chat--approval-buttons (key)
  "The buttons line of the approval KEY."
  (with-temp-buffer
    (pcase-dolist (`(,char ,title ,_) agent-lsp-chat--titles)
      (insert-text-button
       (format "[%s]" title) :type 'agent-lsp-chat-approval
       'help-echo (format "%c" char)
       'action (lambda (_) (agent-lsp-chat--answer
                            key title (and (equal title "Deny")
                                           (agent-lsp-chat--reason)))))
      (insert " "))
    (insert-text-button "[Diff]" :type 'agent-lsp-chat-approval
                        'action (lambda (_)
                                  (let ((review (gethash key agent-lsp--reviews)))
                                    (when review
                                      (agent-lsp--show-diff
                                       agent-lsp-chat--server review)))))
    (insert "   [a]llow [s]ession al[w]ays [d]eny [D]iff")
    (buffer-string)))

(defun agent-lsp-chat--set-line (marker text)
  "Replace the line at MARKER with TEXT."
  (let ((inhibit-read-only t))
    (save-excursion
      (goto-char marker)
      (delete-region marker (line-end-position))
      (insert (propertize text 'read-only t 'front-sticky '(read-only))))))

(defun agent-lsp-chat--render-approval (ev)
  "Show the approval event EV: pending with its buttons, else how it ended."
  (let ((key (agent-lsp--review-key (plist-get ev :runId) (plist-get ev :callId)))
        (state (plist-get ev :state)))
    (cond
     ((equal state "pending")
      (agent-lsp-chat--lines
       (concat (format "approval: %s\n" (or (plist-get ev :tool) ""))
               (agent-lsp-chat--indent (or (plist-get ev :detail)
                                           (plist-get ev :text))))
       'face 'warning 'agent-lsp-approval key 'keymap agent-lsp-chat-approval-map)
      (let ((start (agent-lsp-chat--lines (agent-lsp-chat--approval-buttons key)
                                          'agent-lsp-approval key
                                          'keymap agent-lsp-chat-approval-map)))
        (puthash key (copy-marker start) agent-lsp-chat--approvals)))
     ((gethash key agent-lsp-chat--approvals)
      (agent-lsp-chat--set-line (gethash key agent-lsp-chat--approvals)
                                (format "→ %s" state))
      (remhash key agent-lsp-chat--approvals))
     (t (agent-lsp-chat--lines (format "approval %s: %s" state
                                       (or (plist-get ev :tool) ""))
                               'face 'shadow)))))


;;; Rendering

(defun agent-lsp-chat--heading (id prompt)
  "Write the prompt PROMPT of the run ID as a heading."
  (push id agent-lsp-chat--shown)
  (agent-lsp-chat--lines "")
  (agent-lsp-chat--lines (concat "## " (string-trim (or prompt "")))
                         'face 'bold 'agent-lsp-chat-run id
                         'agent-lsp-chat-prompt (or prompt "")))

(defun agent-lsp-chat--render (ev)
  "Show the stream event EV (live, or from `agentLsp.history')."
  (let ((kind (plist-get ev :kind))
        (text (or (plist-get ev :text) "")))
    (pcase kind
      ("text" (agent-lsp-chat--insert text))
      ;; usage, status and kinds of a newer server: nothing to show
      ("thinking" (agent-lsp-chat--fold "▸ thinking" text))
      ("toolCall"
       (agent-lsp-chat--fold
        (format "▸ %s %s" (or (plist-get ev :tool) "tool")
                (agent-lsp--one-line (if (string-empty-p text)
                                         (format "%S" (plist-get ev :arguments))
                                       text)
                                     100))
        (if (string-empty-p text) (format "%S" (plist-get ev :arguments)) text)))
      ("toolResult"
       (agent-lsp-chat--fold (if (eq (plist-get ev :ok) :json-false)
                                 "  ▸ failed" "  ▸ ok")
                             text))
      ("approval" (agent-lsp-chat--render-approval ev))
      ("steer" (agent-lsp-chat--lines (concat "» " (agent-lsp--one-line text 500))))
      ((or "hook" "compaction")
       (agent-lsp-chat--lines (format "%s: %s" kind (agent-lsp--one-line text 200))
                              'face 'shadow))
      ("stop"
       (let* ((report (plist-get ev :report))
              (reason (or (plist-get report :stopReason) "stopped"))
              (why (or (plist-get report :error)
                       (and (not (equal reason "done")) (plist-get report :summary)))))
         (agent-lsp-chat--lines "")
         (agent-lsp-chat--lines (if why (format "_%s_: %s" reason
                                                (agent-lsp--one-line why 200))
                                  (format "_%s_" reason))
                                'face 'shadow)
         (when (equal agent-lsp-chat--current (plist-get ev :runId))
           (setq agent-lsp-chat--current nil)))))))

(defun agent-lsp-chat--dequeue (item ev)
  "The first event EV of the queued ITEM: it started; nil if it was removed."
  (let ((prompt (agent-lsp--one-line (plist-get item :prompt) 60)))
    (if (equal (plist-get ev :kind) "stop")
        (progn (plist-put item :state 'removed)
               (agent-lsp-chat--set-line (plist-get item :marker)
                                         (format "queued: %s (removed)" prompt))
               nil)
      (plist-put item :state 'started)
      (agent-lsp-chat--set-line (plist-get item :marker)
                                (format "queued: %s (started)" prompt))
      (setq agent-lsp-chat--current (plist-get item :runId))
      (agent-lsp-chat--heading (plist-get item :runId) (plist-get item :prompt))
      t)))

(defun agent-lsp-chat--keep-live (id ev)
  "Keep EV of the run ID while the run runs (at most 20,000 events)."
  (if (equal (plist-get ev :kind) "stop")
      (remhash id agent-lsp-chat--live)
    (let ((events (gethash id agent-lsp-chat--live)))
      (when (< (length events) 20000)
        (puthash id (cons ev events) agent-lsp-chat--live)))))

(defun agent-lsp-chat--on-stream (server ev)
  "Show EV, an `agentLsp/stream' event of SERVER, when it is the chat's."
  (let ((buffer (agent-lsp-chat--buffer))
        (id (plist-get ev :runId)))
    (when (stringp id)
      (agent-lsp-chat--keep-live id ev)
      (when buffer
        (with-current-buffer buffer
          (cond ((not (eq server agent-lsp-chat--server)))
                ;; the history on its way may hold it already
                (agent-lsp-chat--loading
                 (setq agent-lsp-chat--loading
                       (cons ev (if (listp agent-lsp-chat--loading)
                                    agent-lsp-chat--loading))))
                (t (agent-lsp-chat--take id ev))))))))

(defun agent-lsp-chat--take (id ev)
  "Show the event EV of the run ID in the current chat buffer, if it is its."
  (let* ((item (seq-find (lambda (q) (equal (plist-get q :runId) id))
                         agent-lsp-chat--queued))
         (run (agent-lsp--find-run id))
         (seq (plist-get ev :seq))
         (last (gethash id agent-lsp-chat--seq)))
    (cond
     ((and item (eq (plist-get item :state) 'queued)
           (not (agent-lsp-chat--dequeue item ev))))
     ((and (numberp seq) last (<= seq last)))
     ((member id agent-lsp-chat--shown)
      (when (numberp seq) (puthash id seq agent-lsp-chat--seq))
      (agent-lsp-chat--render ev))
     ((and run agent-lsp-chat--session
           (equal (agent-lsp--run-session run) agent-lsp-chat--session))
      ;; a run of this session started elsewhere (`agent-lsp-run')
      (agent-lsp-chat--heading id (agent-lsp--run-title run))
      (agent-lsp-chat--take id ev))
     ((> agent-lsp-chat--awaiting 0)
      ;; the reply to agentLsp.run may still come
      (push ev (alist-get id agent-lsp-chat--early nil nil #'equal))))))

(add-hook 'agent-lsp-stream-functions #'agent-lsp-chat--on-stream)

(defun agent-lsp-chat--hold (server id actions)
  "Hold SERVER's approval request ID (ACTIONS) of a chat's run."
  (let* ((item (seq-find (lambda (a) (plist-get a :callId)) actions))
         (buffer (agent-lsp-chat--buffer))
         (run-id (and item (plist-get item :runId))))
    (when (and run-id buffer
               (member run-id (buffer-local-value 'agent-lsp-chat--shown buffer)))
      (puthash (agent-lsp--review-key run-id (plist-get item :callId))
               (list server id (append actions nil)) agent-lsp-chat--held)
      (message "agent-lsp: approval waiting in %s (a/s/w/d/D on it)"
               agent-lsp-chat-buffer-name)
      t)))

(defun agent-lsp-chat--withdrawn (server id)
  "SERVER withdrew its request ID: forget it if the chat holds it."
  (maphash (lambda (key held)
             (when (and (eq (car held) server) (equal (cadr held) id))
               (remhash key agent-lsp-chat--held)))
           agent-lsp-chat--held))

(add-hook 'agent-lsp--approval-hold-functions #'agent-lsp-chat--hold)
(add-hook 'agent-lsp--approval-withdraw-functions #'agent-lsp-chat--withdrawn)


;;; Sending

(defun agent-lsp-chat--on-reply (buffer prompt result)
  "In BUFFER, the reply RESULT to a run of PROMPT (nil: refused)."
  (with-current-buffer buffer
    (setq agent-lsp-chat--awaiting (max 0 (1- agent-lsp-chat--awaiting)))
    (when result
      (let ((id (plist-get result :runId)))
        (setq agent-lsp-chat--session (or (plist-get result :sessionId)
                                          agent-lsp-chat--session))
        (if (eq (plist-get result :queued) t)
            (let ((start (agent-lsp-chat--lines
                          (format "queued: %s" (agent-lsp--one-line prompt 60))
                          'face 'shadow)))
              (setq agent-lsp-chat--queued
                    (append agent-lsp-chat--queued
                            (list (list :runId id :prompt prompt :state 'queued
                                        :session agent-lsp-chat--session
                                        :marker (copy-marker start))))))
          (setq agent-lsp-chat--current id)
          (agent-lsp-chat--heading id prompt))
        (dolist (ev (reverse (alist-get id agent-lsp-chat--early nil nil #'equal)))
          (agent-lsp-chat--take id ev))
        (setq agent-lsp-chat--early
              (assoc-delete-all id agent-lsp-chat--early))))
    (when (zerop agent-lsp-chat--awaiting)
      (setq agent-lsp-chat--early nil))))

(defun agent-lsp-chat--start (prompt &optional queue)
  "Start a run of PROMPT in the chat's session (QUEUE: after the running one)."
  (let ((buffer (current-buffer)))
    (cl-incf agent-lsp-chat--awaiting)
    (agent-lsp--send-run agent-lsp-chat--server
                         (append (list :prompt prompt
                                       :sessionId agent-lsp-chat--session)
                                 (and queue '(:queue t)))
                         prompt nil
                         (lambda (result)
                           (agent-lsp-chat--on-reply buffer prompt result)))))

(defun agent-lsp-chat--running-p ()
  "Non-nil while a run of the chat runs."
  (let ((run (and agent-lsp-chat--current
                  (agent-lsp--find-run agent-lsp-chat--current))))
    (and run (agent-lsp--run-running-p run))))

(defun agent-lsp-chat--take-input ()
  "The input's text, trimmed; the input is emptied."
  (unless (derived-mode-p 'agent-lsp-chat-mode)
    (user-error "agent-lsp: not in the chat buffer (M-x agent-lsp-chat)"))
  (let ((text (string-trim (buffer-substring-no-properties
                            agent-lsp-chat--input (point-max)))))
    (when (string-empty-p text)
      (user-error "agent-lsp: type a message at the end of the buffer first"))
    (delete-region agent-lsp-chat--input (point-max))
    text))

(defun agent-lsp-chat-send ()
  "Send the input: a follow-up in the chat's session, or a steer of its run."
  (interactive)
  (let ((text (agent-lsp-chat--take-input))
        (buffer (current-buffer)))
    (if (not (agent-lsp-chat--running-p))
        (agent-lsp-chat--start text)
      (agent-lsp--command
       agent-lsp-chat--server "agentLsp.steer"
       (list :runId agent-lsp-chat--current :text text)
       (lambda (ok)
         (unless (eq ok t)              ; it ended meanwhile: a follow-up
           (with-current-buffer buffer (agent-lsp-chat--start text))))))))

(defun agent-lsp-chat-queue ()
  "Queue the input: it runs after the chat's running run (at once if none)."
  (interactive)
  (agent-lsp-chat--start (agent-lsp-chat--take-input) t))

(defun agent-lsp-chat--cancel-queued (server session)
  "Cancel SERVER's queued runs of SESSION, newest first."
  (let ((buffer (agent-lsp-chat--buffer)))
    (when buffer
      (with-current-buffer buffer
        (dolist (item (reverse agent-lsp-chat--queued))
          (when (and (eq (plist-get item :state) 'queued)
                     (eq server agent-lsp-chat--server)
                     (equal (plist-get item :session) session)
                     (not (plist-get item :cancelling)))
            (plist-put item :cancelling t)
            (agent-lsp--command server "agentLsp.cancel"
                                (list :runId (plist-get item :runId))
                                #'ignore)))))))

(defun agent-lsp-chat-stop ()
  "Cancel the chat's queued runs (newest first), then its running run."
  (interactive)
  (with-current-buffer (or (agent-lsp-chat--buffer)
                           (user-error "agent-lsp: no chat"))
    (agent-lsp-chat--cancel-queued agent-lsp-chat--server agent-lsp-chat--session)
    (when (agent-lsp-chat--running-p)
      (agent-lsp-cancel agent-lsp-chat--current))))


;;; Sessions: history, fork

(defun agent-lsp-chat--loaded (from-history)
  "The history is shown: the live events that came meanwhile, except those
of the runs in FROM-HISTORY (a list of run ids), which it holds."
  (let ((meanwhile (and (listp agent-lsp-chat--loading)
                        (reverse agent-lsp-chat--loading))))
    (setq agent-lsp-chat--loading nil)
    (dolist (ev meanwhile)
      (unless (member (plist-get ev :runId) from-history)
        (agent-lsp-chat--take (plist-get ev :runId) ev)))))

(defun agent-lsp-chat--show-run (run)
  "Show RUN of a history; return its id if shown from the history's events.
A run this Emacs streams is shown from the events it received."
  (let* ((id (plist-get run :runId))
         (live (reverse (gethash id agent-lsp-chat--live))))
    (agent-lsp-chat--heading id (plist-get run :prompt))
    (if live
        (dolist (ev live)
          (when (numberp (plist-get ev :seq))
            (puthash id (plist-get ev :seq) agent-lsp-chat--seq))
          (agent-lsp-chat--render ev))
      (seq-doseq (ev (plist-get run :events))
        (agent-lsp-chat--render (plist-put (copy-sequence ev) :runId id))))
    (unless (plist-get run :stop)
      (setq agent-lsp-chat--current id))
    (and (not live) id)))

(defun agent-lsp-chat--load (session &optional then)
  "Show SESSION's history in the chat (from `agentLsp.history'); then THEN."
  (let ((buffer (current-buffer)))
    (setq agent-lsp-chat--loading 'none)
    (agent-lsp--command
     agent-lsp-chat--server "agentLsp.history" (list :sessionId session)
     (lambda (history)
       (with-current-buffer buffer
         (when (equal agent-lsp-chat--session session)
           (when (stringp (plist-get history :title))
             (agent-lsp-chat--lines (concat "# " (plist-get history :title))
                                    'face 'bold))
           (agent-lsp-chat--loaded
            (delq nil (mapcar #'agent-lsp-chat--show-run
                              (plist-get history :runs))))
           (when then (funcall then)))))
     (lambda (msg)
       (with-current-buffer buffer
         (message "agent-lsp: agentLsp.history failed: %s" msg)
         (agent-lsp-chat--loaded nil))))))

(defun agent-lsp-chat--switch (session &optional then)
  "Show SESSION (nil: a new one) in the chat; then THEN."
  (agent-lsp-chat--reset)
  (setq agent-lsp-chat--session session)
  (if session
      (progn (puthash agent-lsp-chat--server session agent-lsp--sessions)
             (agent-lsp-chat--load session then))
    (remhash agent-lsp-chat--server agent-lsp--sessions)
    (when then (funcall then))))

;;;###autoload
(defun agent-lsp-chat (&optional session)
  "Open the conversation of the current session (or of SESSION).
The next run continues it; a session picked with `agent-lsp-sessions'
is shown with its history."
  (interactive)
  (let* ((chat (agent-lsp-chat--buffer))
         (server (if (and chat (eq (current-buffer) chat))
                     (buffer-local-value 'agent-lsp-chat--server chat)
                   (agent-lsp--ensure-server)))
         (target (or session (gethash server agent-lsp--sessions))))
    (with-current-buffer (agent-lsp-chat--ensure-buffer)
      (setq agent-lsp-chat--server server)
      (when (and (not (equal target agent-lsp-chat--session))
                 (not (agent-lsp-chat--running-p)))
        (agent-lsp-chat--switch target)))
    (pop-to-buffer (agent-lsp-chat--buffer))
    (goto-char (point-max))))

(defun agent-lsp-fork ()
  "Fork the chat's session before the prompt at point; edit it in the input.
The new session has the history before that prompt's run; the files
are not touched, and the old session stays as it was."
  (interactive)
  (unless (derived-mode-p 'agent-lsp-chat-mode)
    (user-error "agent-lsp: fork from a prompt in the chat (M-x agent-lsp-chat)"))
  (let ((pos (point)) run prompt)
    (while (and (> pos (point-min)) (not (get-text-property pos 'agent-lsp-chat-run)))
      (setq pos (1- pos)))
    (setq run (get-text-property pos 'agent-lsp-chat-run)
          prompt (get-text-property pos 'agent-lsp-chat-prompt))
    (unless (and run agent-lsp-chat--session)
      (user-error "agent-lsp: no prompt at or above point"))
    (let ((buffer (current-buffer)))
      (agent-lsp--command
       agent-lsp-chat--server "agentLsp.fork"
       (list :sessionId agent-lsp-chat--session :runId run)
       (lambda (result)
         (with-current-buffer buffer
           (agent-lsp-chat--switch
            (plist-get result :sessionId)
            (lambda ()
              (delete-region agent-lsp-chat--input (point-max))
              (goto-char (point-max))
              (insert prompt)))))))))

(provide 'agent-lsp-chat)
;;; agent-lsp-chat.el ends here
