"""LiteLLM proxy (and gateways built the same way) in front of other providers."""

from tests.endpoints import split_sse

# A provider's already-parsed tool input passed through as a JSON *object* in
# `function.arguments` instead of a string (issue 21 of this project, reported against a
# LiteLLM proxy; the same shape: https://github.com/ar-jan/llm-venice/issues/45). The SDK does
# not validate chunks, so the object reaches the client as a dict.
ARGUMENTS_OBJECT = split_sse(r'''
data: {"id":"chatcmpl-4f0e0c2a","created":1752251818,"model":"claude-sonnet-4","object":"chat.completion.chunk","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"Reading the file.","role":"assistant"}}]}

data: {"id":"chatcmpl-4f0e0c2a","created":1752251818,"model":"claude-sonnet-4","object":"chat.completion.chunk","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"","tool_calls":[{"id":"toolu_019mYkJiJLhqRXv7","function":{"arguments":{"path":"calc.py"},"name":"read_file"},"type":"function","index":0}]}}]}

data: {"id":"chatcmpl-4f0e0c2a","created":1752251818,"model":"claude-sonnet-4","object":"chat.completion.chunk","system_fingerprint":null,"choices":[{"finish_reason":"tool_calls","index":0,"delta":{}}]}

data: [DONE]
''')

# No arguments at all: `""` (some translations send an empty string for a call without
# parameters; the OpenAI API itself sends "{}"). `""` means `{}`.
ARGUMENTS_EMPTY = split_sse(r'''
data: {"id":"chatcmpl-77aa","created":1752251818,"model":"claude-sonnet-4","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"","role":"assistant","tool_calls":[{"id":"toolu_01Empty","function":{"arguments":"","name":"list_files"},"type":"function","index":0}]}}]}

data: {"id":"chatcmpl-77aa","created":1752251818,"model":"claude-sonnet-4","object":"chat.completion.chunk","choices":[{"finish_reason":"tool_calls","index":0,"delta":{}}]}

data: [DONE]
''')

# A name repeated whole in every delta of the call (LiteLLM translations of some providers).
NAME_REPEATED = split_sse(r'''
data: {"id":"chatcmpl-5b","created":1752251818,"model":"bedrock-llama","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"id":"tooluse_a1","function":{"arguments":"{\"path\":","name":"read_file"},"type":"function","index":0}]}}]}

data: {"id":"chatcmpl-5b","created":1752251818,"model":"bedrock-llama","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"id":"tooluse_a1","function":{"arguments":"\"calc.py\"}","name":"read_file"},"type":"function","index":0}]}}]}

data: {"id":"chatcmpl-5b","created":1752251818,"model":"bedrock-llama","object":"chat.completion.chunk","choices":[{"finish_reason":"tool_calls","index":0,"delta":{}}]}

data: [DONE]
''')
