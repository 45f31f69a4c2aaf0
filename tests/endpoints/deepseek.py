"""DeepSeek (api.deepseek.com) in thinking mode."""

from tests.endpoints import split_sse

# Thinking mode streams `reasoning_content` deltas before the answer or the tool calls; a
# keep-alive SSE comment may come while it thinks. "For turns that do perform tool calls, the
# reasoning_content must be fully passed back to the API in all subsequent requests",
# otherwise HTTP 400 "The reasoning_content in the thinking mode must be passed back to the API."
# Sources: https://api-docs.deepseek.com/guides/thinking_mode (tool calls),
# https://github.com/anomalyco/opencode/issues/24722, https://github.com/crewAIInc/crewAI/issues/5878
THINK_THEN_CALL = split_sse(r'''
: keep-alive

data: {"id":"5b1f3c1e-7d0a-4f7e-9e52-0b3c1f1d2a10","object":"chat.completion.chunk","created":1777000000,"model":"deepseek-v4-pro","system_fingerprint":"fp_ffc7281d48_prod0820_fp8_kvcache","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":""},"logprobs":null,"finish_reason":null}]}

data: {"id":"5b1f3c1e-7d0a-4f7e-9e52-0b3c1f1d2a10","object":"chat.completion.chunk","created":1777000000,"model":"deepseek-v4-pro","system_fingerprint":"fp_ffc7281d48_prod0820_fp8_kvcache","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"The user asks about add(); "},"logprobs":null,"finish_reason":null}]}

data: {"id":"5b1f3c1e-7d0a-4f7e-9e52-0b3c1f1d2a10","object":"chat.completion.chunk","created":1777000000,"model":"deepseek-v4-pro","system_fingerprint":"fp_ffc7281d48_prod0820_fp8_kvcache","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"I should read calc.py first."},"logprobs":null,"finish_reason":null}]}

data: {"id":"5b1f3c1e-7d0a-4f7e-9e52-0b3c1f1d2a10","object":"chat.completion.chunk","created":1777000000,"model":"deepseek-v4-pro","system_fingerprint":"fp_ffc7281d48_prod0820_fp8_kvcache","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_00_uV7pQk3LmN2","type":"function","function":{"name":"read_file","arguments":""}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"5b1f3c1e-7d0a-4f7e-9e52-0b3c1f1d2a10","object":"chat.completion.chunk","created":1777000000,"model":"deepseek-v4-pro","system_fingerprint":"fp_ffc7281d48_prod0820_fp8_kvcache","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\": "}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"5b1f3c1e-7d0a-4f7e-9e52-0b3c1f1d2a10","object":"chat.completion.chunk","created":1777000000,"model":"deepseek-v4-pro","system_fingerprint":"fp_ffc7281d48_prod0820_fp8_kvcache","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"calc.py\"}"}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"5b1f3c1e-7d0a-4f7e-9e52-0b3c1f1d2a10","object":"chat.completion.chunk","created":1777000000,"model":"deepseek-v4-pro","system_fingerprint":"fp_ffc7281d48_prod0820_fp8_kvcache","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":512,"completion_tokens":41,"total_tokens":553,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":18},"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":512}}

data: [DONE]
''')

THINK_THEN_ANSWER = split_sse(r'''
data: {"id":"8c2e","object":"chat.completion.chunk","created":1777000001,"model":"deepseek-v4-pro","system_fingerprint":"fp_ffc7281d48_prod0820_fp8_kvcache","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"add() subtracts."},"logprobs":null,"finish_reason":null}]}

data: {"id":"8c2e","object":"chat.completion.chunk","created":1777000001,"model":"deepseek-v4-pro","system_fingerprint":"fp_ffc7281d48_prod0820_fp8_kvcache","choices":[{"index":0,"delta":{"content":"add() returns a - b."},"logprobs":null,"finish_reason":null}]}

data: {"id":"8c2e","object":"chat.completion.chunk","created":1777000001,"model":"deepseek-v4-pro","system_fingerprint":"fp_ffc7281d48_prod0820_fp8_kvcache","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop"}]}

data: [DONE]
''')
