"""Deliberate breakages of the glue between engines, client, runner and maths, each with the tests that must
catch it.

    python -m benchmarks.breakages [NAME-SUBSTRING ...]

The mutation benchmark (benchmarks/mutation.py) covers the statistics, metrics and verdict modules operator by
operator. The weaknesses that matter most sit outside them: counters read as totals instead of window deltas,
a client that does not keep C requests in flight, variants sent different requests, a renamed SGLang field, a
resume that ignores a changed config, a reuse that ignores a changed engine. Each breakage below is one such
plausible bug written as a one-line source edit. For each, the repository's tracked files are copied to a
scratch folder (the checkout is never modified), the edit is applied and the named tests run; the breakage is
caught when they fail.

Prints one line per breakage and exits 1 when any goes unnoticed. tests/benchmarks/test_breakages.py checks, in the
fast suite, that every edit still applies to the current source and every named test still exists.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Breakage:
    name: str
    path: str  # file to edit, relative to the repository
    old: str  # occurs exactly once in that file
    new: str
    tests: tuple[str, ...]  # pytest node ids that must fail


KA = "tests/runner/test_known_answers.py"
BREAKAGES = [
    Breakage("acceptance from cumulative counters instead of window deltas", "specbench/runner/window.py",
             "float(after[k]) - float(before.get(k) or 0.0)", "float(after[k])",
             (f"{KA}::test_counter_delta_is_the_window_increase", f"{KA}::test_vllm_counter_path_known_answers")),
    Breakage("per-position counters: last label set wins instead of the sum", "specbench/server/engines/vllm.py",
             "per_pos[pos] = per_pos.get(pos, 0.0) + value", "per_pos[pos] = value",
             (f"{KA}::test_read_counters_sums_labels_and_orders_positions",)),
    Breakage("a counter read from its first label set only", "specbench/server/engines/prometheus.py",
             "return sum(series.values()) if series else None",
             "return next(iter(series.values())) if series else None",
             (f"{KA}::test_read_counters_sums_labels_and_orders_positions",)),
    Breakage("a missing vLLM counter read as 0", "specbench/server/engines/prometheus.py",
             "return sum(series.values()) if series else None", "return sum(series.values()) if series else 0.0",
             (f"{KA}::test_read_counters_missing_counters_are_absent_not_zero",)),
    Breakage("the client sends one request at a time (no closed loop)", "specbench/client/stream.py",
             "range(min(concurrency, len(requests)))", "range(1)",
             (f"{KA}::test_vllm_counter_path_known_answers",)),
    Breakage("the open loop waits for each request before sending the next", "specbench/client/load/open.py",
             "tasks.append(asyncio.create_task(one(p, due)))", "await one(p, due)",
             ("tests/runner/test_capacity_mdc.py::test_capacity_matches_the_simulated_queue",)),
    Breakage("the arrival schedule drawn anew for every rate", "specbench/plan/windows.py",
             "arrival_offsets(load.arrival, n, point.rate, schedule_seed(s, repeat), load.burstiness,",
             "arrival_offsets(load.arrival, n, point.rate, schedule_seed(s, repeat) + int(point.rate * 1000), "
             "load.burstiness,",
             ("tests/metrics/test_openloop.py::test_open_loop_windows_send_the_same_schedule_to_every_variant",)),
    Breakage("an open-loop schedule offered at its unit draw's rate, not the nominal one", "specbench/plan/arrivals.py",
             "scale = realized / rate if math.isfinite(realized) else 1.0 / rate", "scale = 1.0 / rate",
             ("tests/metrics/test_openloop.py::test_drawn_schedules_realize_the_nominal_rate",
              "tests/report/test_openloop_section_known_answer.py::test_the_issue_scenario_is_reproduced_and_now_answered_within_its_bracket")),
    Breakage("an SLO decided met on the point estimate", "specbench/metrics/capacity.py",
             "    elif p.high <= threshold:", "    elif p.estimate <= threshold:",
             ("tests/metrics/test_openloop.py::test_a_rate_is_decided_only_when_its_interval_is_on_one_side",)),
    Breakage("percentile intervals over requests taken as independent", "specbench/metrics/slo.py",
             "    se, df = _cdf_se(_batches(windows, BATCHES_PER_WINDOW), iid.estimate)",
             "    se, df = math.nan, 0",
             ("tests/metrics/test_openloop.py::test_batch_interval_widens_for_correlated_requests_and_never_narrows",)),
    Breakage("each variant gets other seeds", "specbench/plan/windows.py",
             "point.temperature, seed=s.seed + index)",
             "point.temperature, seed=s.seed + index + len(variant))",
             (f"{KA}::test_vllm_counter_path_known_answers",)),
    Breakage("SGLang's per-request verify count ignored", "specbench/server/engines/sglang.py",
             'verify = json_int(f.get("spec_verify_ct"))', "verify = None",
             (f"{KA}::test_sglang_request_path_known_answers",)),
    Breakage("SGLang's own accept length not kept in the raw records", "specbench/server/engines/sglang.py",
             'length = json_float(f.get("spec_accept_length"))', "length = None",
             ("tests/server/test_sglang.py::test_parse_spec_both_generations",)),
    Breakage("an SGLang field name that SGLang does not send", "specbench/server/engines/sglang.py",
             '"accepted": "spec_num_correct_drafts"', '"accepted": "spec_num_accepted_drafts"',
             ("tests/server/test_sglang_protocol.py::test_specbench_reads_a_chunk_sglang_serialized",
              f"{KA}::test_sglang_request_path_known_answers")),
    Breakage("the command engine's acceptance counter ignored", "specbench/server/engines/command.py",
             "metric = self.config.acceptance_metric", "metric = None",
             ("tests/server/test_engines_counter_acceptance.py::test_command_engine_verify_step_counter_gives_tau",)),
    Breakage("vLLM's per-request flag also on the baseline", "specbench/server/engines/vllm.py",
             "if drafter.speculative and args and PER_REQUEST_FLAG not in args:", "if PER_REQUEST_FLAG not in args:",
             ("tests/metrics/test_acceptance_reconcile.py::test_baseline_and_other_engines_never_get_the_flag",)),
    Breakage("--resume accepts a changed config", "specbench/runner/matrix.py",
             "if state.config_hash not in (None, config_hash(self.cfg)):", "if False:",
             ("tests/runner/test_reuse.py::test_resume_with_a_changed_config_is_refused",)),
    Breakage("--reuse ignores the hardware", "specbench/runner/reuse.py",
             '"hardware": environment.hardware_fingerprint()', '"hardware": ""',
             ("tests/runner/test_reuse.py::test_fingerprint_changes_with_what_determines_the_measurement",)),
    Breakage("--reuse ignores the engine version", "specbench/runner/reuse.py",
             '"engine": [engine.kind, engine.version()]', '"engine": [engine.kind]',
             ("tests/runner/test_reuse.py::test_fingerprint_changes_with_what_determines_the_measurement",)),
    Breakage("--reuse copies a variant that failed in the source run", "specbench/runner/reuse.py",
             'in ("done", "reused")', 'in ("done", "reused", "failed")',
             ("tests/runner/test_reuse.py::test_a_variant_that_failed_in_the_source_run_is_measured_not_reused",)),
    Breakage("stop signals left to the disposition specbench inherited", "specbench/runner/signals.py",
             "        loop.add_signal_handler(sig, on_signal, sig)\n", "        continue\n",
             ("tests/runner/test_lifecycle.py::test_a_stop_signal_inherited_as_ignored_still_stops_the_run",)),
    Breakage("no write check of the run directory before launch", "specbench/runner/matrix.py",
             "        check_writable(o.out, o.resume)\n", "",
             ("tests/records/test_rundir_storage_faults.py::test_read_only_output_directory",
              "tests/records/test_rundir_storage_faults.py::test_out_under_a_regular_file")),
    Breakage("a record torn by a full disk left in the file", "specbench/records/rundir.py",
             "                os.ftruncate(self._fd, size)\n", "                pass\n",
             ("tests/records/test_rundir_storage_faults.py::test_full_disk_mid_run_then_resume",)),
]


def copy_tracked(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def check(b: Breakage, work: Path) -> tuple[bool, str]:
    """Apply `b` in `work`, run its tests, restore the file; (caught, pytest's last line)."""
    f = work / b.path
    src = f.read_text()
    if src.count(b.old) != 1:
        return False, f"the edit no longer applies ({src.count(b.old)} matches in {b.path})"
    f.write_text(src.replace(b.old, b.new))
    try:
        env = {**os.environ, "PYTHONPATH": str(work), "PYTHONDONTWRITEBYTECODE": "1"}
        r = subprocess.run(["nice", "-n", "10", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            *b.tests], cwd=work, env=env, capture_output=True, text=True)
        lines = r.stdout.strip().splitlines()
        return r.returncode == 1, lines[-1] if lines else r.stderr.strip()[-200:]
    finally:
        f.write_text(src)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("only", nargs="*", help="run the breakages whose name contains one of these")
    args = ap.parse_args(argv)
    chosen = [b for b in BREAKAGES if not args.only or any(o in b.name for o in args.only)]
    work = Path(tempfile.mkdtemp(prefix="specbench-breakages-"))
    missed = 0
    try:
        copy_tracked(work)
        for b in chosen:
            t0 = time.monotonic()
            caught, last = check(b, work)
            missed += not caught
            print(f"{'caught' if caught else 'MISSED':<7} {b.name} ({time.monotonic() - t0:.0f} s; {last})",
                  flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(chosen) - missed} of {len(chosen)} breakages caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
