"""A stand-in inference server for tests: speaks the OpenAI, vLLM and SGLang wire formats deterministically,
and injects faults on request. Run `python -m tests.standin.server --help`; see server.py."""
