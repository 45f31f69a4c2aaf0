;;; agent-lsp-rpc.el --- Commands to the agent-lsp server, answers to its requests -*- lexical-binding: t; -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; `workspace/executeCommand' helpers (asynchronous, or waited for in a
;; loop that C-g interrupts) and the machinery that answers the
;; server's requests later, from a timer, outside jsonrpc's process
;; filter.  Load `agent-lsp', not this file.

;;; Code:

(require 'agent-lsp-base)

;;; Commands to the server

(defun agent-lsp--command (server command argument on-success
                                  &optional on-error)
  "Send COMMAND with ARGUMENT to SERVER (`workspace/executeCommand').
Asynchronous: call ON-SUCCESS with the result, or ON-ERROR with a message.
ARGUMENT nil is sent as {}."
  (let ((fail (lambda (msg)
                (if on-error (funcall on-error msg)
                  (message "agent-lsp: %s failed: %s" command msg)))))
    (jsonrpc-async-request
     server :workspace/executeCommand
     (list :command command
           :arguments (vector (or argument (make-hash-table))))
     :success-fn on-success
     :error-fn (lambda (err) (funcall fail (agent-lsp--error-message err)))
     :timeout-fn (lambda ()
                   (funcall fail (format "no answer within %ss"
                                         agent-lsp-request-timeout)))
     :timeout agent-lsp-request-timeout)))

(defun agent-lsp--call (server command &optional argument)
  "COMMAND's result from SERVER with ARGUMENT, waited for (\\[keyboard-quit] stops).
Signals a `user-error' naming the problem when the command fails.
Not `jsonrpc-request': jsonrpc 1.0.14 (Emacs 28) can leave later
messages unread after its synchronous answer."
  (let ((done nil) (result nil) (failure nil))
    (agent-lsp--command server command argument
                        (lambda (value) (setq done t result value))
                        (lambda (msg) (setq done t failure msg)))
    (while (not done)
      (accept-process-output nil 0.05))
    (when failure
      (user-error "agent-lsp: %s failed: %s" command failure))
    result))

(defun agent-lsp--flush-changes (server)
  "Flush the pending didChange of the buffers SERVER manages."
  (dolist (buffer (eglot--managed-buffers server))
    (when (buffer-live-p buffer)
      (with-current-buffer buffer
        (eglot--signal-textDocument/didChange)))))


;;; Answering server requests later
;;
;; Eglot 1.9 answers a server request with the value its handler returns,
;; from inside jsonrpc's process filter.  A handler that waits for the user
;; there (`completing-read') runs the event loop inside the filter: the
;; stream stops, and output arriving meanwhile re-enters jsonrpc 1.0.14's
;; filter, which loses or garbles messages.  So the approval, edit and
;; diagnostics handlers answer later instead, from a timer, once the filter
;; is done: jsonrpc's dispatch is wrapped to know the request id and to let
;; a handler leave without an answer.

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

(defun agent-lsp--send-answer (server id result &optional error-message)
  "Answer SERVER's request ID with RESULT, or an error with ERROR-MESSAGE."
  (if (not (jsonrpc-running-p server))
      (message "agent-lsp: the server is gone; its request was not answered")
    (condition-case err
        (if error-message
            (jsonrpc-connection-send
             server :id id :error (list :code -32603 :message error-message))
          (jsonrpc-connection-send server :id id :result result))
      (error (message "agent-lsp: could not answer the server: %s"
                      (error-message-string err))))))

(defun agent-lsp--answer-now (server id fn)
  "Answer SERVER's request ID with FN's value (an error if FN fails)."
  (let ((value nil) (failure nil))
    (condition-case err
        (setq value (funcall fn))
      (error (setq failure (error-message-string err))))
    (agent-lsp--send-answer server id value failure)))

(defun agent-lsp--answer-when (server ready timeout fn)
  "Answer the request being dispatched from SERVER with FN's value, later.
FN runs from a timer, outside jsonrpc's process filter, once READY
returns non-nil or TIMEOUT seconds passed (READY nil: at once).
Returns FN's value at once instead when the request's id is unknown."
  (let ((id agent-lsp--request-id)
        (deadline (+ (float-time) (or timeout 0))))
    (if (null id)
        (funcall fn)
      (letrec ((poll (lambda ()
                       (if (or (null ready) (>= (float-time) deadline)
                               (ignore-errors (funcall ready)))
                           (agent-lsp--answer-now server id fn)
                         (run-at-time 0.05 nil poll)))))
        (run-at-time 0 nil poll))
      (throw 'agent-lsp--answer-later nil))))

(defun agent-lsp--answer-later (server fn)
  "Answer the request being dispatched from SERVER with FN's value, later."
  (agent-lsp--answer-when server nil nil fn))

(provide 'agent-lsp-rpc)
;;; agent-lsp-rpc.el ends here
