"""vLLM's OpenAI-compatible server."""

from tests.endpoints import split_sse

# An error inside the stream, two shapes across versions: newer vLLM wraps an ErrorResponse in
# `{"error": {...}}`; older ones sent the ErrorResponse itself (`"object": "error"`). Source:
# https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/openai/serving_engine.py
# (create_streaming_error_response), https://github.com/vllm-project/vllm/issues/3755
ERROR_WRAPPED = split_sse(r'''
data: {"id":"chatcmpl-b1","object":"chat.completion.chunk","created":1750000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}

data: {"error": {"object": "error", "message": "This model's maximum context length is 32768 tokens. However, you requested 40211 tokens in the messages.", "type": "BadRequestError", "param": null, "code": 400}}

data: [DONE]
''')

ERROR_BARE = split_sse(r'''
data: {"id":"chatcmpl-b2","object":"chat.completion.chunk","created":1750000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}

data: {"object": "error", "message": "guided decoding failed: grammar could not be compiled", "type": "BadRequestError", "param": null, "code": 400}

data: [DONE]
''')

# With a reasoning parser (--reasoning-parser), reasoning arrives as `reasoning_content`.
# Source: https://docs.vllm.ai/en/latest/features/reasoning_outputs.html
REASONING_CONTENT = split_sse(r'''
data: {"id":"chatcmpl-b3","object":"chat.completion.chunk","created":1750000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Plain greeting."},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-b3","object":"chat.completion.chunk","created":1750000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":"Hello."},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}

data: [DONE]
''')
