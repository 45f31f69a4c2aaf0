"""Gemini's OpenAI compatibility layer (generativelanguage.googleapis.com/v1beta/openai, and
Vertex AI's */endpoints/openapi on *aiplatform.googleapis.com)."""

from tests.endpoints import split_sse

# Parallel calls in one chunk, without `index`; Gemini 3 puts the thought signature in the
# first call's `extra_content.google.thought_signature`, which must come back unchanged on the
# next request (400 otherwise). Sources:
# https://ai.google.dev/gemini-api/docs/openai (tool calls), https://ai.google.dev/gemini-api/docs/thought-signatures
# (OpenAI compatibility section), https://github.com/continuedev/continue/pull/8865.
SIGNATURE = "CiQBcsjafF3rTz9YwOgzKuWQDUeDM1eWpJjm+Kd5cH3iJv6yQWoKaAFyyNp8"
PARALLEL_NO_INDEX = split_sse(r'''
data: {"choices":[{"delta":{"role":"assistant","tool_calls":[{"extra_content":{"google":{"thought_signature":"CiQBcsjafF3rTz9YwOgzKuWQDUeDM1eWpJjm+Kd5cH3iJv6yQWoKaAFyyNp8"}},"function":{"arguments":"{\"path\":\"calc.py\"}","name":"read_file"},"id":"function-call-13364373627392826815","type":"function"},{"function":{"arguments":"{\"path\":\"test_calc.py\"}","name":"read_file"},"id":"function-call-5306201436012416571","type":"function"}]},"finish_reason":"tool_calls","index":0}],"created":1763500000,"id":"aKkgafSlB8GNz7IPmK3C","model":"gemini-3-pro-preview","object":"chat.completion.chunk","usage":{"completion_tokens":40,"prompt_tokens":380,"total_tokens":420}}

data: [DONE]
''')

# The same without ids (older Gemini 2.x answers): two whole calls, no index, no id.
PARALLEL_NO_INDEX_NO_ID = split_sse(r'''
data: {"choices":[{"delta":{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"path\":\"calc.py\"}","name":"read_file"},"type":"function"},{"function":{"arguments":"{\"path\":\"test_calc.py\"}","name":"read_file"},"type":"function"}]},"finish_reason":"tool_calls","index":0}],"created":1740000000,"model":"gemini-2.0-flash","object":"chat.completion.chunk"}

data: [DONE]
''')
