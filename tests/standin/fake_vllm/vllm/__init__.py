"""NOT vLLM: a stand-in package for specbench's tests. Put tests/standin/fake_vllm first on the engine's
PYTHONPATH and `python -m vllm.entrypoints.openai.api_server` serves the stand-in in vLLM's format."""
