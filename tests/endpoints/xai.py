"""xAI (api.x.ai/v1)."""

from tests.endpoints import split_sse

# xAI accepts `name` only on user messages ("Only user messages can have a name"); the
# strict scripted server plays that refusal. Stream shape as OpenAI's. Sources:
# https://docs.x.ai/docs/guides/function-calling, https://github.com/BerriAI/litellm/issues/8466
CALL = split_sse(r'''
data: {"id":"9e3a","object":"chat.completion.chunk","created":1752000000,"model":"grok-4","choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"system_fingerprint":"fp_0e5a"}

data: {"id":"9e3a","object":"chat.completion.chunk","created":1752000000,"model":"grok-4","choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_58215737","function":{"name":"read_file","arguments":"{\"path\":\"calc.py\"}"},"index":0,"type":"function"}]}}],"system_fingerprint":"fp_0e5a"}

data: {"id":"9e3a","object":"chat.completion.chunk","created":1752000000,"model":"grok-4","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":400,"completion_tokens":30,"total_tokens":430},"system_fingerprint":"fp_0e5a"}

data: [DONE]
''')
