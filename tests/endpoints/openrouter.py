"""OpenRouter (openrouter.ai/api/v1)."""

from tests.endpoints import split_sse

# An error after the stream began comes as a chunk with a top-level `error` object (HTTP
# status stays 200) and finish_reason "error"; SSE comments keep the connection alive.
# Source: https://openrouter.ai/docs/api-reference/streaming (errors during streaming).
MID_STREAM_ERROR = split_sse(r'''
: OPENROUTER PROCESSING

data: {"id":"gen-1752000000-abc","provider":"OpenAI","model":"openai/gpt-4.1","object":"chat.completion.chunk","created":1752000000,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null,"native_finish_reason":null,"logprobs":null}]}

data: {"id":"cmpl-abc123","object":"chat.completion.chunk","created":1752000000,"model":"openai/gpt-4.1","provider":"openai","error":{"code":"server_error","message":"Provider disconnected unexpectedly"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}
''')

# Reasoning models stream `reasoning` deltas; the final chunk's usage carries OpenRouter's own
# `cost`. Source: https://openrouter.ai/docs/use-cases/reasoning-tokens,
# https://openrouter.ai/docs/use-cases/usage-accounting
REASONING_AND_COST = split_sse(r'''
: OPENROUTER PROCESSING

data: {"id":"gen-1752000001-def","provider":"DeepInfra","model":"deepseek/deepseek-r1","object":"chat.completion.chunk","created":1752000001,"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Short answer "},"finish_reason":null,"native_finish_reason":null,"logprobs":null}]}

data: {"id":"gen-1752000001-def","provider":"DeepInfra","model":"deepseek/deepseek-r1","object":"chat.completion.chunk","created":1752000001,"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"is enough."},"finish_reason":null,"native_finish_reason":null,"logprobs":null}]}

data: {"id":"gen-1752000001-def","provider":"DeepInfra","model":"deepseek/deepseek-r1","object":"chat.completion.chunk","created":1752000001,"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi.","reasoning":null},"finish_reason":"stop","native_finish_reason":"stop","logprobs":null}]}

data: {"id":"gen-1752000001-def","provider":"DeepInfra","model":"deepseek/deepseek-r1","object":"chat.completion.chunk","created":1752000001,"choices":[],"usage":{"prompt_tokens":300,"completion_tokens":12,"total_tokens":312,"cost":0.00042,"is_byok":false}}

data: [DONE]
''')
