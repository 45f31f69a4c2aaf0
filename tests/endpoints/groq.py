"""Groq (api.groq.com/openai/v1)."""

from tests.endpoints import split_sse

# Groq refuses any message property outside the OpenAI schema with HTTP 400 ("'messages.2' :
# property 'reasoning_content' is unsupported"); its last chunk carries usage in `x_groq`.
# Sources: https://console.groq.com/docs/openai (unsupported fields),
# https://github.com/cline/cline/issues/2223, https://github.com/continuedev/continue/issues/5123
# (`name`/extra properties refused). The strict scripted server plays the refusal.
CALL = split_sse(r'''
data: {"id":"chatcmpl-3f1","object":"chat.completion.chunk","created":1752000000,"model":"llama-3.3-70b-versatile","system_fingerprint":"fp_9a8b91ba77","choices":[{"index":0,"delta":{"role":"assistant","content":null},"logprobs":null,"finish_reason":null}],"x_groq":{"id":"req_01jz"}}

data: {"id":"chatcmpl-3f1","object":"chat.completion.chunk","created":1752000000,"model":"llama-3.3-70b-versatile","system_fingerprint":"fp_9a8b91ba77","choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_gq1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"calc.py\"}"},"index":0}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-3f1","object":"chat.completion.chunk","created":1752000000,"model":"llama-3.3-70b-versatile","system_fingerprint":"fp_9a8b91ba77","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"x_groq":{"id":"req_01jz","usage":{"queue_time":0.02,"prompt_tokens":420,"prompt_time":0.01,"completion_tokens":20,"completion_time":0.03,"total_tokens":440,"total_time":0.04}}}

data: [DONE]
''')
