" Syntax of the agent-lsp://stream buffer: run headers and the bracketed event lines.
if exists('b:current_syntax')
  finish
endif

syntax match agentLspHeader /^## run .*$/
syntax match agentLspRun /^\[run [^]]*\]$/
syntax match agentLspTool /^\[tool\]/
syntax match agentLspResult /^\[result\]/
syntax match agentLspError /^\[result: error\]/
syntax match agentLspApproval /^\[approval: [^]]*\]/
syntax match agentLspDenied /^\[approval: \(denied\|withdrawn\)\]/
syntax match agentLspStatus /^\[status\].*$/
syntax match agentLspCompaction /^\[compaction\]/
syntax match agentLspStop /^\[stop[^]]*\]/
syntax match agentLspStopBad /^\[stop: \(fatal\|cancelled\|max_turns\)\]/
syntax match agentLspSteer /^» /
syntax match agentLspCode /`[^`]\+`/

highlight default link agentLspHeader Title
highlight default link agentLspRun Title
highlight default link agentLspTool Function
highlight default link agentLspResult Identifier
highlight default link agentLspError DiagnosticError
highlight default link agentLspApproval DiagnosticWarn
highlight default link agentLspDenied DiagnosticError
highlight default link agentLspStatus Comment
highlight default link agentLspCompaction Comment
highlight default link agentLspStop DiagnosticOk
highlight default link agentLspStopBad DiagnosticWarn
highlight default link agentLspSteer Question
highlight default link agentLspCode String

let b:current_syntax = 'agent_lsp_stream'
