"""Gateways written in JavaScript (Node proxies, Cloudflare Workers, LibreChat-style relays).

They slice a model's text by UTF-16 code units and `JSON.stringify` each slice, so an emoji
(a surrogate pair) can leave as "\ud83d" in one chunk and "\ude00" in the next: each chunk's
JSON is valid, each half alone is not a character. Sources: JSON.stringify's well-formed
output for lone surrogates (https://github.com/tc39/proposal-well-formed-stringify),
https://github.com/vercel/ai/issues/1366, https://github.com/openai/openai-node/issues/1051.
"""

from tests.endpoints import split_sse

# Text: "Fixed \ud83d\ude00" split between the halves.
TEXT_SPLIT_EMOJI = split_sse(r'''
data: {"id":"chatcmpl-js1","object":"chat.completion.chunk","created":1752000000,"model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","content":"Fixed \ud83d"},"finish_reason":null}]}

data: {"id":"chatcmpl-js1","object":"chat.completion.chunk","created":1752000000,"model":"gpt-4.1","choices":[{"index":0,"delta":{"content":"\ude00 done."},"finish_reason":null}]}

data: {"id":"chatcmpl-js1","object":"chat.completion.chunk","created":1752000000,"model":"gpt-4.1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]
''')

# A write_file call whose content holds "\ud83d\ude00", split between two argument deltas.
WRITE_SPLIT_EMOJI = split_sse(r'''
data: {"id":"chatcmpl-js2","object":"chat.completion.chunk","created":1752000000,"model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_js1","type":"function","function":{"name":"write_file","arguments":""}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-js2","object":"chat.completion.chunk","created":1752000000,"model":"gpt-4.1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\": \"smile.txt\", \"content\": \"smile \ud83d"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-js2","object":"chat.completion.chunk","created":1752000000,"model":"gpt-4.1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\ude00 and a lone \ud83d!\\n\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-js2","object":"chat.completion.chunk","created":1752000000,"model":"gpt-4.1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]
''')

# A lone high half at the very end of the text (the gateway cut the stream's last slice).
TEXT_LONE_HALF = split_sse(r'''
data: {"id":"chatcmpl-js3","object":"chat.completion.chunk","created":1752000000,"model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","content":"cut \ud83d"},"finish_reason":null}]}

data: {"id":"chatcmpl-js3","object":"chat.completion.chunk","created":1752000000,"model":"gpt-4.1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]
''')

# UTF-8 bytes of one character split across two network chunks (any gateway, any server):
# sent with `raw_split` so "é" and "😀" straddle HTTP chunk boundaries.
TEXT_UTF8 = split_sse('''
data: {"id":"chatcmpl-js4","object":"chat.completion.chunk","created":1752000000,"model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","content":"café 😀 ok"},"finish_reason":null}]}

data: {"id":"chatcmpl-js4","object":"chat.completion.chunk","created":1752000000,"model":"gpt-4.1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]
''')
