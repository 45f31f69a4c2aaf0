"""Ollama's OpenAI-compatible /v1/chat/completions."""

from tests.endpoints import split_sse

# Ollama 0.20.x: every parallel call comes whole in its own chunk, all with `index: 0`, told
# apart only by `id`. Source: https://github.com/ollama/ollama/issues/15457 (0.20.2/0.20.4),
# https://github.com/vercel/ai/pull/14277.
PARALLEL_SAME_INDEX = split_sse(r'''
data: {"id":"chatcmpl-410","object":"chat.completion.chunk","created":1775700000,"model":"qwen3-coder:30b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_v1tq8b2m","index":0,"type":"function","function":{"name":"read_file","arguments":"{\"path\":\"calc.py\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-410","object":"chat.completion.chunk","created":1775700000,"model":"qwen3-coder:30b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_x7kd0q4n","index":0,"type":"function","function":{"name":"read_file","arguments":"{\"path\":\"test_calc.py\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-410","object":"chat.completion.chunk","created":1775700000,"model":"qwen3-coder:30b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}]}

data: {"id":"chatcmpl-410","object":"chat.completion.chunk","created":1775700000,"model":"qwen3-coder:30b","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":412,"completion_tokens":38,"total_tokens":450}}

data: [DONE]
''')

# Ollama before 0.4.7: tool calls without any `index`. Source:
# https://github.com/ollama/ollama/issues/7881
PARALLEL_NO_INDEX = split_sse(r'''
data: {"id":"chatcmpl-77","object":"chat.completion.chunk","created":1732900000,"model":"llama3.1:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_8fq2ls1c","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"calc.py\"}"}},{"id":"call_0n3jd9xz","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"test_calc.py\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-77","object":"chat.completion.chunk","created":1732900000,"model":"llama3.1:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}]}

data: [DONE]
''')

# Ollama with thinking models (qwen3, gpt-oss): the reasoning comes as `reasoning` deltas.
# Source: https://github.com/ollama/ollama/blob/main/docs/openai.md (thinking: `reasoning`).
REASONING_FIELD = split_sse(r'''
data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1775700000,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"The user wants a greeting; "},"finish_reason":null}]}

data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1775700000,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"keep it short."},"finish_reason":null}]}

data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1775700000,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello!"},"finish_reason":null}]}

data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1775700000,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}

data: [DONE]
''')
