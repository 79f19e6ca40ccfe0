"""NOT vLLM: a stand-in package for specbench's tests. Put tests/standin/fake_vllm first on PYTHONPATH and
`python -m vllm.entrypoints.openai.api_server ...` starts the stand-in server speaking vLLM's formats."""

__version__ = "0.32.0"
