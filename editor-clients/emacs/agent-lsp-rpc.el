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
  ;; Eglot has no public way to send the pending changes now (it sends
  ;; them when idle): its internal function, present in every Eglot so far
  (when (fboundp 'eglot--signal-textDocument/didChange)
    (dolist (buffer (agent-lsp--managed-buffers server))
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
;; is done.
;;
;; No advice, nothing global: two methods specialised on `agent-lsp-server'
;; (public generic functions of Eglot and jsonrpc), so that other servers
;; never meet this code.  The `eglot-handle-request' method notes that one
;; of our requests is being handled; a handler that answers later returns
;; an `agent-lsp--later' object instead of its answer.  jsonrpc, from
;; Eglot 1.9's to the newest, sends a handler's value with
;; `jsonrpc-connection-send' (:id ID :result VALUE): our method there learns
;; the request id, sends nothing, and starts the later answer.

(cl-defstruct (agent-lsp--later (:constructor agent-lsp--later (start))
                                (:copier nil))
  "The value of a handler that answers later: START is called with the id."
  start)

(defvar agent-lsp--handling nil
  "The agent-lsp server whose request is being handled, nil otherwise.")

(cl-defmethod eglot-handle-request :around ((server agent-lsp-server) _method
                                            &rest _params)
  "Note that SERVER's request is being handled (its handlers may answer later)."
  (let ((agent-lsp--handling server))
    (cl-call-next-method)))

(cl-defmethod jsonrpc-connection-send :around ((_server agent-lsp-server)
                                               &rest args)
  "Send ARGS to the server, unless they answer with an `agent-lsp--later'.
That answer is not sent: its start function gets the request id."
  (let ((result (plist-get args :result)))
    (if (agent-lsp--later-p result)
        (funcall (agent-lsp--later-start result) (plist-get args :id))
      (cl-call-next-method))))

(defun agent-lsp--deferrable-p (server)
  "Non-nil if SERVER's request being handled may be answered later.
Only requests of an `agent-lsp-server' can: a connection of another
class (agent-lsp started with a plain command) is answered at once."
  (and server (eq server agent-lsp--handling)))

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
  "Answer the request being handled from SERVER with FN's value, later.
FN runs from a timer, outside jsonrpc's process filter, once READY
returns non-nil or TIMEOUT seconds passed (READY nil: at once).
Returns what the handler returns: an `agent-lsp--later', or FN's value
at once when the request cannot be answered later."
  (if (not (agent-lsp--deferrable-p server))
      (funcall fn)
    (let ((deadline (+ (float-time) (or timeout 0))))
      (agent-lsp--later
       (lambda (id)
         (letrec ((poll (lambda ()
                          (if (or (null ready) (>= (float-time) deadline)
                                  (ignore-errors (funcall ready)))
                              (agent-lsp--answer-now server id fn)
                            (run-at-time 0.05 nil poll)))))
           (run-at-time 0 nil poll)))))))

(defun agent-lsp--answer-later (server fn)
  "Answer the request being handled from SERVER with FN's value, later.
Returns what the handler returns (see `agent-lsp--answer-when')."
  (agent-lsp--answer-when server nil nil fn))

(provide 'agent-lsp-rpc)
;;; agent-lsp-rpc.el ends here
