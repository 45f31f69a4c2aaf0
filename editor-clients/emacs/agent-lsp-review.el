;;; agent-lsp-review.el --- Approvals (with the edit's diff) and edits of agent-lsp -*- lexical-binding: t; -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; The server asks approvals with `window/showMessageRequest' (Allow,
;; Allow for session, Always allow when it names a rule to save, Deny).
;; Just before, an `approval' stream event
;; carries an edit's unified diff: it is shown in a `diff-mode' buffer
;; while the choice is asked; after Deny, an optional reason is read and
;; sent back with the answer.  Every request is answered, later, from a
;; timer: \\[keyboard-quit] is a denial.  The agent's edits
;; (`workspace/applyEdit') are applied without Eglot's y/n question and
;; the edited buffers saved.  Load `agent-lsp', not this file.

;;; Code:

(require 'diff-mode)
(require 'agent-lsp-rpc)

(defvar eglot-confirm-server-initiated-edits) ; Eglot <= 1.15
(defvar eglot-confirm-server-edits)     ; Eglot >= 1.16


;;; Diffs of pending edits

(defvar agent-lsp--reviews (make-hash-table :test #'equal)
  "\"RUN-ID CALL-ID\" -> the pending `approval' event of an edit (with :diff).")

(defconst agent-lsp-diff-buffer-name "*agent-lsp diff*"
  "Name of the buffer that shows the diff of an edit waiting for approval.")

(defun agent-lsp--review-key (run-id call-id)
  "The key of RUN-ID's approval CALL-ID in `agent-lsp--reviews'."
  (format "%s %s" run-id call-id))

(defun agent-lsp--keep-review (_server ev)
  "Keep the diff of EV, a pending edit's `approval' event, until it is answered."
  (when (equal (plist-get ev :kind) "approval")
    (let ((key (agent-lsp--review-key (plist-get ev :runId)
                                      (plist-get ev :callId))))
      (if (and (equal (plist-get ev :state) "pending")
               (stringp (plist-get ev :diff)))
          (puthash key ev agent-lsp--reviews)
        (remhash key agent-lsp--reviews)))))

(add-hook 'agent-lsp-stream-functions #'agent-lsp--keep-review)

(defun agent-lsp--review-for (actions)
  "The pending edit that the approval request's ACTIONS are about, or nil.
Our server puts runId and callId in each action item."
  (let ((item (seq-find (lambda (a) (plist-get a :callId)) actions)))
    (and item
         (gethash (agent-lsp--review-key (plist-get item :runId)
                                         (plist-get item :callId))
                  agent-lsp--reviews))))

(defun agent-lsp--show-diff (server review)
  "Show the diff of REVIEW, a pending edit of SERVER; return the window."
  (let ((buffer (get-buffer-create agent-lsp-diff-buffer-name))
        (root (agent-lsp--server-root server)))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert (plist-get review :diff))
        (unless (bolp) (insert "\n"))
        (when (eq (plist-get review :diffTruncated) t)
          (insert "\n[the diff stops here: it is longer than 1 MB]\n"))
        (agent-lsp--mark-hunks (agent-lsp--hunks-of review))
        (diff-mode)
        ;; a/ and b/ are relative to the workspace: `diff-goto-source' works
        (when root (setq default-directory root))
        (setq buffer-read-only t)
        (setq-local header-line-format
                    (format (if (agent-lsp--hunks-of review)
                                "agent-lsp: %s %s — answer in the minibuffer (k here kills a hunk: it is rejected)"
                              "agent-lsp: %s %s — answer in the minibuffer")
                            (plist-get review :tool)
                            (agent-lsp--relative (or (plist-get review :uri) "")
                                                 server)))
        (goto-char (point-min))))
    (display-buffer buffer '((display-buffer-reuse-window
                              display-buffer-pop-up-window)
                             (inhibit-same-window . t)))))


(defun agent-lsp--hunks-of (review)
  "The hunks REVIEW offers, in the order of its diff: a list of 0-based indices.
Empty when its diff was cut (no hunk choice then)."
  (let (out)
    (seq-doseq (file (or (plist-get review :files) []))
      (seq-doseq (hunk (or (plist-get file :hunks) []))
        (push (plist-get hunk :index) out)))
    (nreverse out)))

(defun agent-lsp--mark-hunks (indices)
  "Tag the `@@' lines of the diff in this buffer with INDICES, in order."
  (save-excursion
    (goto-char (point-min))
    (while (and indices (re-search-forward "^@@ " nil t))
      (put-text-property (line-beginning-position) (line-end-position)
                         'agent-lsp-hunk (pop indices)))))

(defun agent-lsp--kept-hunks (buffer)
  "The indices of the hunks still in BUFFER (the user may kill some)."
  (with-current-buffer buffer
    (save-excursion
      (goto-char (point-min))
      (let (out)
        (while (re-search-forward "^@@ " nil t)
          (let ((index (get-text-property (line-beginning-position) 'agent-lsp-hunk)))
            (when index (push index out))))
        (nreverse out)))))


;;; Approvals

(defvar agent-lsp--approval-queue nil
  "Approval requests waiting for the prompt: (SERVER ID MESSAGE ACTIONS).")

(defvar agent-lsp--approval-active nil
  "(SERVER ID TAG) of the approval being asked, or nil.")

(defun agent-lsp--ask (message titles)
  "Ask MESSAGE, a choice among TITLES; RET takes the first.
The prompt names the choices and the default: completion hides them
until TAB, and a person should not have to guess what RET does."
  (let ((enable-recursive-minibuffers t)
        (completion-ignore-case t))
    (completing-read (format "[agent-lsp] %s\nChoose %s (RET = %s, C-g denies): "
                             message (string-join titles " / ") (car titles))
                     titles nil t nil nil (car titles))))

(defun agent-lsp--read-reason ()
  "The user's optional reason for a denial, nil for none (or \\[keyboard-quit])."
  (let ((reason (condition-case nil
                    (read-string
                     "[agent-lsp] Why deny? (optional, RET for none): ")
                  (quit nil))))
    (and reason (not (string-empty-p (string-trim reason)))
         (string-trim reason))))

(defun agent-lsp--answer-approval (server message actions &optional tag)
  "Ask the approval MESSAGE of SERVER with ACTIONS; the answer, nil to deny.
An edit's diff is shown meanwhile.  Always returns: \\[keyboard-quit],
an error, a throw to TAG (the server withdrew the request) or no
answer within the server's approval timeout is a denial."
  (let* ((titles (delq nil (mapcar (lambda (a) (plist-get a :title))
                                   (append actions nil))))
         (review (and agent-lsp-show-diff (agent-lsp--review-for actions)))
         (window (and review (agent-lsp--show-diff server review)))
         ;; the server withdraws the request after its approval timeout;
         ;; should that withdrawal get lost, give up a little later
         (timeout (+ (agent-lsp--approval-timeout server) 2))
         (answer
          (unwind-protect
              (catch (or tag 'agent-lsp--no-tag)
                (condition-case err
                    (with-timeout (timeout
                                   (message "agent-lsp: approval timed out: denied")
                                   nil)
                      (let ((choice (agent-lsp--ask message (or titles '("OK")))))
                        (if (and (equal choice "Deny") agent-lsp-ask-deny-reason)
                            (list choice (agent-lsp--read-reason))
                          (list choice))))
                  (quit (message "agent-lsp: approval dismissed: denied")
                        nil)
                  (error (message "agent-lsp: approval failed (%s): denied"
                                  (error-message-string err))
                         nil)))
            (when (window-live-p window) (quit-window nil window))))
         (chosen (and (stringp (car answer))
                      (cl-find (car answer) titles :test #'string=)))
         (offered (and window (agent-lsp--hunks-of review)))
         (kept (if (buffer-live-p (get-buffer agent-lsp-diff-buffer-name))
                   (agent-lsp--kept-hunks agent-lsp-diff-buffer-name)
                 offered)))
    (run-hook-with-args 'agent-lsp-approval-functions message chosen)
    (cond
     ((not chosen) nil)
     ;; hunks killed in the diff buffer: an Allow of the others only
     ((and offered (equal chosen "Allow") (not (equal kept offered)))
      (list :title chosen :hunks (vconcat kept)))
     ((cadr answer) (list :title chosen :reason (cadr answer)))
     (t (list :title chosen)))))

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

(defvar agent-lsp--approval-hold-functions nil
  "Abnormal hook run with (SERVER ID ACTIONS) for each approval request.
A function that returns non-nil holds the request: it answers it itself
\(`agent-lsp--send-answer'), and the minibuffer never asks it.")

(defvar agent-lsp--approval-withdraw-functions nil
  "Abnormal hook run with (SERVER ID) when the server withdraws a request.")

(defun agent-lsp--withdraw (server id)
  "SERVER no longer waits for its request ID: close or drop its prompt."
  (run-hook-with-args 'agent-lsp--approval-withdraw-functions server id)
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
   ((not (agent-lsp--deferrable-p server))
    (agent-lsp--answer-approval server message actions))
   (t
    (agent-lsp--later
     (lambda (id)
       ;; the chat holds its runs' approvals: answered there, never asked
       ;; in the minibuffer, which would take the keys the user types
       (unless (run-hook-with-args-until-success
                'agent-lsp--approval-hold-functions server id actions)
         (setq agent-lsp--approval-queue
               (append agent-lsp--approval-queue
                       (list (list server id message actions))))
         (run-at-time 0 nil #'agent-lsp--next-approval)))))))

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
    (delete-dups (mapcar #'agent-lsp--uri-to-path (delq nil uris)))))

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
                       (agent-lsp--uri-to-path (plist-get change :uri))))
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

(defvar agent-lsp--edit-server nil
  "The agent-lsp server whose edit `agent-lsp--apply-edit' applies.")

(defvar agent-lsp--eglot-applies nil
  "The edit that Eglot's own `workspace/applyEdit' handler is given, or nil.")

(defun agent-lsp--eglot-apply (edit)
  "Have Eglot's own `workspace/applyEdit' handler apply EDIT.
Through the public generic function `eglot-handle-request', so Eglot
checks the versions and edits the buffers as it does for any server."
  (let ((agent-lsp--eglot-applies edit))
    (eglot-handle-request (or agent-lsp--edit-server (agent-lsp--server))
                          'workspace/applyEdit :edit edit)))

(defun agent-lsp--apply-edit (edit)
  "Apply EDIT, the agent's WorkspaceEdit; an ApplyWorkspaceEditResult.
A refused edit (a stale version, a declined confirmation) is
`applied: false' with the reason, not an error."
  (condition-case err
      (let* ((paths (agent-lsp--edit-paths edit))
             ;; visit first: Eglot asks before touching unvisited files
             (buffers (mapcar #'agent-lsp--visit paths))
             ;; a buffer the user had unsaved changes in stays unsaved
             ;; (Decision 81: the server tells the model)
             (clean (seq-remove #'buffer-modified-p buffers))
             ;; Eglot's handler asks y/n before an edit when these say so:
             ;; Eglot <= 1.15 reads the first, Eglot >= 1.16 the second
             (eglot-confirm-server-initiated-edits agent-lsp-confirm-edits)
             (eglot-confirm-server-edits (and agent-lsp-confirm-edits 'summary)))
        (agent-lsp--eglot-apply (agent-lsp--prepare-edit edit))
        ;; No flush of the didChange here: the server waits for it (eglot sends it when idle).
        (when agent-lsp-save-after-edit
          (mapc #'agent-lsp--save clean))
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
PARAMS go to Eglot's METHOD handler when SERVER is not agent-lsp (and
when `agent-lsp--eglot-apply' hands it an agent-lsp edit)."
  (if (or (not (agent-lsp--server-p server))
          (and edit (eq edit agent-lsp--eglot-applies)))
      (apply #'cl-call-next-method server method params)
    (agent-lsp--answer-later
     server (lambda ()
              (let ((agent-lsp--edit-server server))
                (agent-lsp--apply-edit edit))))))

(provide 'agent-lsp-review)
;;; agent-lsp-review.el ends here
