"""Azure OpenAI (*.openai.azure.com)."""

from tests.endpoints import split_sse

# The first chunk has empty `choices` and the prompt's `prompt_filter_results`; content chunks
# carry `content_filter_results`; with asynchronous filtering a last chunk may come with no
# `delta` at all. Sources: https://learn.microsoft.com/azure/ai-foundry/openai/concepts/content-filter
# (streaming), https://learn.microsoft.com/azure/ai-foundry/openai/concepts/content-streaming
PARALLEL_WITH_FILTERS = split_sse(r'''
data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}}]}

data: {"choices":[{"content_filter_results":{},"delta":{"content":null,"refusal":null,"role":"assistant","tool_calls":[{"function":{"arguments":"","name":"read_file"},"id":"call_AzA1","index":0,"type":"function"}]},"finish_reason":null,"index":0,"logprobs":null}],"created":1751000000,"id":"chatcmpl-Az1","model":"gpt-4.1-2025-04-14","object":"chat.completion.chunk","system_fingerprint":"fp_ee1d74bde0"}

data: {"choices":[{"content_filter_results":{},"delta":{"tool_calls":[{"function":{"arguments":"{\"path\":\"calc.py\"}"},"index":0}]},"finish_reason":null,"index":0,"logprobs":null}],"created":1751000000,"id":"chatcmpl-Az1","model":"gpt-4.1-2025-04-14","object":"chat.completion.chunk","system_fingerprint":"fp_ee1d74bde0"}

data: {"choices":[{"content_filter_results":{},"delta":{"tool_calls":[{"function":{"arguments":"","name":"read_file"},"id":"call_AzB2","index":1,"type":"function"}]},"finish_reason":null,"index":0,"logprobs":null}],"created":1751000000,"id":"chatcmpl-Az1","model":"gpt-4.1-2025-04-14","object":"chat.completion.chunk","system_fingerprint":"fp_ee1d74bde0"}

data: {"choices":[{"content_filter_results":{},"delta":{"tool_calls":[{"function":{"arguments":"{\"path\":\"test_calc.py\"}"},"index":1}]},"finish_reason":null,"index":0,"logprobs":null}],"created":1751000000,"id":"chatcmpl-Az1","model":"gpt-4.1-2025-04-14","object":"chat.completion.chunk","system_fingerprint":"fp_ee1d74bde0"}

data: {"choices":[{"content_filter_results":{},"delta":{},"finish_reason":"tool_calls","index":0,"logprobs":null}],"created":1751000000,"id":"chatcmpl-Az1","model":"gpt-4.1-2025-04-14","object":"chat.completion.chunk","system_fingerprint":"fp_ee1d74bde0"}

data: {"choices":[{"content_filter_offsets":{"check_offset":0,"start_offset":0,"end_offset":60},"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}},"finish_reason":null,"index":0}],"created":0,"id":"","model":"","object":""}

data: [DONE]
''')
