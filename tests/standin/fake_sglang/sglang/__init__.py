"""NOT SGLang: a stand-in package for specbench's tests. Put tests/standin/fake_sglang first on PYTHONPATH and
`python -m sglang.launch_server ...` starts the stand-in server speaking SGLang's formats."""

__version__ = "0.5.23"
