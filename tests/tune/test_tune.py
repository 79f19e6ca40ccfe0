"""`specbench tune` (issue 18): the search's pure parts, and the known answer on a stand-in whose speed is
set by the draft length k and the requests in flight n (tests/standin/server.py --accept-table
--step-tokens): a step takes 12 ms x max(1, n(k+1)/6) (a roofline), and k drafts accept a(k) per step.
Speedups against plain decoding (tokens per step / relative step time):

    k:        1     2     4     8       (a = 0.8, 1.2, 2.0, 2.3)
    C=1:    1.80  2.20  3.00  2.20      best k = 4 (36% ahead)
    C=4:    1.35  1.10  0.90  0.55      best k = 1 (23% ahead)
    C=16:   0.90  0.61  0.50  0.39      plain decoding wins: tune.json says null

Paced (every step due at its cumulative time from the request's arrival), so a stall of the loaded
2-core machine is caught up within the request; only a stall over a window's very end shows. Windows of
2 waves of 48 tokens (0.6-9 s) and 3 launches keep such a stall (160 ms seen) from widening the
confirmation's intervals past the margins (1.35 at C=4 against 1.05)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from specbench.config import parse_config
from specbench.plan.drafter import check_per_batch_size
from specbench.plan.prompts import Prompt
from specbench.shared.errors import ConfigError
from specbench.tune.rounds import rounds, setting_name, settings, split_prompts, survivors
from specbench.tune.schedule import Range, flag_sets, ranges, vllm_schedule
from specbench.tune.search import TuneOptions, halve, run_tune
from tests.conftest import REPO, set_faults, standin_config

ACCEPT = "1:0.8,2:1.2,4:2.0,8:2.3"
BASE = ["--ms-per-token", "12", "--paced", "--step-tokens", "6"]


# -- pure parts ---------------------------------------------------------------------------------------
def test_halving_keeps_the_better_half_rounded_up() -> None:
    assert halve([("a", 1.0), ("b", 3.0), ("c", 2.0), ("d", 0.5)]) == ["b", "c"]
    assert halve([("a", math.nan), ("b", 0.9), ("c", 1.1)]) == ["c", "b"]
    assert [rounds(n) for n in (1, 2, 3, 4, 5, 8)] == [1, 1, 2, 2, 3, 3]
    assert [survivors(5, r) for r in (1, 2, 3)] == [5, 3, 2]


def test_ranges_merge_equal_neighbours_and_start_at_one() -> None:
    assert ranges({1: "k4", 4: "k1", 16: None}) == [Range(1, 1, "k4"), Range(2, 4, "k1"), Range(5, 16, None)]
    assert ranges({1: "k4", 4: "k4", 16: None}) == [Range(1, 4, "k4"), Range(5, 16, None)]


def _argv(k: int, method: str = "ngram") -> list[str]:
    return ["python", "-m", "vllm", "--speculative-config",
            json.dumps({"method": method, "num_speculative_tokens": k, "prompt_lookup_max": 4})]


def test_vllm_schedule_is_one_speculative_config_with_k_per_range() -> None:
    spec, why = vllm_schedule(ranges({1: "k4", 4: "k1", 16: None}), {"k4": _argv(4), "k1": _argv(1)})
    assert why == "" and spec is not None
    assert spec["num_speculative_tokens"] == 4 and spec["method"] == "ngram"
    assert spec["num_speculative_tokens_per_batch_size"] == [[1, 1, 4], [2, 4, 1], [5, 16, 0]]
    check_per_batch_size([tuple(r) for r in spec["num_speculative_tokens_per_batch_size"]], 4)  # vLLM's rules
    spec, why = vllm_schedule(ranges({1: "a", 4: "b"}), {"a": _argv(4), "b": _argv(2, "eagle3")})
    assert spec is None and "more than num_speculative_tokens" in why
    assert vllm_schedule(ranges({1: None}), {})[0] is None


def test_sglang_flag_sets_one_per_range() -> None:
    argv = {"k4": ["python", "-m", "sglang.launch_server", "--tp", "8", "--speculative-algorithm", "NGRAM",
                   "--speculative-num-draft-tokens", "5"]}
    assert flag_sets(ranges({1: "k4", 8: None}), argv) == [
        {"concurrency": [1, 1], "setting": "k4", "args": ["--speculative-algorithm", "NGRAM",
                                                          "--speculative-num-draft-tokens", "5"]},
        {"concurrency": [2, 8], "setting": None, "args": []}]


def test_per_batch_size_follows_vllms_rules() -> None:
    check_per_batch_size([(1, 1, 4), (2, 16, 0)], 4)
    for bad in ([], [(2, 4, 1)], [(1, 4, 1), (3, 8, 1)], [(1, 4, 5)], [(1, 0, 1)]):
        with pytest.raises(ValueError):
            check_per_batch_size(bad, 4)


def test_a_winner_at_the_edge_of_its_grid_is_named() -> None:
    from specbench.tune.output import grid_edge

    grid = {"num_tokens": [1, 2, 4, 8], "mode": ["a", "b"]}
    assert grid_edge(grid, {"num_tokens": 8, "mode": "a"}) == ["num_tokens=8 (the largest tried)"]
    assert grid_edge(grid, {"num_tokens": 1, "mode": "b"}) == ["num_tokens=1 (the smallest tried)"]
    assert grid_edge(grid, {"num_tokens": 4, "mode": "a"}) == []


def test_prompt_split_is_seeded_disjoint_and_keeps_every_category() -> None:
    ps = [Prompt(f"{c}{i}", c, f"{c} {i}") for c in ("a", "b") for i in range(5)]
    one = split_prompts(ps, 0.4, seed=0)
    assert split_prompts(ps, 0.4, seed=0) == one
    assert not {p.id for p in one.search} & {p.id for p in one.confirm}
    assert sorted(p.category for p in one.confirm) == ["a", "a", "b", "b"]
    with pytest.raises(ConfigError, match="at least 2"):
        split_prompts(ps[:1], 0.5, seed=0)


def test_tune_section_is_checked(model_dir: Path) -> None:
    data = standin_config(model_dir, 8000)
    data["tune"] = {"variants": {"ngram": {"num_tokens": [1, 2]}}}
    cfg = parse_config(data)
    assert [s.name for s in settings(cfg)["ngram"]] == ["ngram-num_tokens-1", "ngram-num_tokens-2"]
    for tune, msg in [({"variants": {"nope": {"num_tokens": [1]}}}, "no such variant"),
                      ({"variants": {"base": {"x": [1]}}}, "is the baseline"),
                      ({"variants": {"ngram": {"num_tokens": []}}}, "non-empty list")]:
        with pytest.raises(ConfigError, match=msg):
            parse_config({**data, "tune": tune})
    with pytest.raises(ConfigError, match="num_tokens"):
        settings(parse_config({**data, "tune": {"variants": {"ngram": {"num_tokens": [0]}}}}))
    assert len(setting_name("v" * 60, {"a": "x" * 80})) <= 64
    external = {**data, "tune": {"variants": {"ngram": {"num_tokens": [1]}}},
                "engine": {"kind": "external", "url": "http://127.0.0.1:1"},
                "variants": [{**v, "url": f"http://127.0.0.1:{i + 1}"} for i, v in enumerate(data["variants"])]}
    with pytest.raises(ConfigError, match="one server per setting"):
        run_tune(parse_config(external), TuneOptions(out=model_dir.parent / "t"))


# -- the known answer ------------------------------------------------------------------------------
def tune_config(model_dir: Path, port: int) -> dict:
    data = standin_config(model_dir, port, sweep={
        "prompts": [{"set": "seed", "categories": ["code"]}], "output_lens": [48], "waves": 2,
        "concurrency": [1, 4, 16], "launches": 3, "repeats": 1, "warmup_requests": 0, "request_timeout_s": 30})
    template = data["engine"]["command"]
    data["variants"] = [
        {"name": "base", "drafter": "autoregressive", "baseline": True},
        {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 3},
         "command": [*template, *BASE, "--accept-table", ACCEPT, "--drafts-per-step", "{num_tokens}"]}]
    data["tune"] = {"variants": {"ngram": {"num_tokens": [1, 2, 4, 8]}}, "confirm_fraction": 0.5}
    set_faults(model_dir.parent, "base", BASE)
    return data


def test_tune_recovers_every_optimum_and_confirms_it(tmp_path, model_dir, port, no_survivors) -> None:
    """The search's rounds and the confirmation at C=1 and 4 (C=16, where plain decoding wins and tune.json
    says null, is the next test's: its windows are the longest, 3 of this test's 4.7 minutes)."""
    data = tune_config(model_dir, port)
    data["sweep"]["concurrency"] = [1, 4]
    cfg = parse_config(data)
    out = tmp_path / "tune"
    run_tune(cfg, TuneOptions(out=out, skip_preflight=True))
    no_survivors()
    data = json.loads((out / "tune.json").read_text())
    levels = data["variants"]["ngram"]["concurrency"]
    assert levels["1"]["params"] == {"num_tokens": 4}
    assert levels["4"]["params"] == {"num_tokens": 1}
    assert levels["1"]["confirmed"]["outcome"] == "adopt"
    assert levels["1"]["confirmed"]["ci_low"] > 1.05
    assert 2.5 < levels["1"]["search_speedup"] < 3.5  # 3.0 set
    assert data["rounds"] == ["search-1", "search-2"]  # 4 settings: 4 -> 2 -> 1 per concurrency
    assert [r["concurrency"] for r in data["variants"]["ngram"]["ranges"]] == [[1, 1], [2, 4]]
    ready = data["variants"]["ngram"]["ready_variant"]  # engine kind command: one launch per range
    assert [v["params"]["num_tokens"] for v in ready] == [4, 1]
    # the prompts the confirmation measured were never searched on
    search = {json.loads(x)["prompt"] for x in (out / "prompts-search.jsonl").read_text().splitlines()}
    confirm = {json.loads(x)["prompt"] for x in (out / "prompts-confirm.jsonl").read_text().splitlines()}
    assert search and confirm and not search & confirm
    assert (out / "tune.png").stat().st_size > 0 and "| 4 |" in (out / "tune.md").read_text()


def test_tune_on_vllm_writes_and_measures_the_dynamic_schedule(tmp_path, port, no_survivors) -> None:
    """The same known answer through engine kind vllm (tests/standin/fake_vllm serves
    num_speculative_tokens_per_batch_size as vLLM 0.32 does): tune.json's schedule is one
    speculative_config, and the confirmation measures it as `ngram-dynamic`. Two settings, k = 1 and 4 (each
    level's winner among the four): one search round, since the rounds' halving is the test above's."""
    import os
    import sys

    from tests.conftest import make_model_dir

    fake = REPO / "tests" / "standin" / "fake_vllm"
    data = {"name": "tune-vllm", "model": {"path": str(make_model_dir(tmp_path / "model")), "served_name": "standin"},
            "engine": {"kind": "vllm", "python": sys.executable, "version": "0.32.0", "port": port,
                       "startup_timeout_s": 20, "stop_timeout_s": 3,
                       "env": {"PYTHONPATH": f"{fake}{os.pathsep}{REPO}", "STANDIN_MS_PER_TOKEN": BASE[1],
                               "STANDIN_ARGS": f"--paced --step-tokens 6 --accept-table {ACCEPT}"}},
            "variants": [{"name": "base", "drafter": "autoregressive", "baseline": True},
                         {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 3}}],
            "sweep": {"prompts": [{"set": "seed", "categories": ["code"]}], "output_lens": [48], "waves": 2,
                      "concurrency": [1, 4, 16], "launches": 3, "repeats": 1, "warmup_requests": 0,
                      "request_timeout_s": 30},
            "tune": {"variants": {"ngram": {"num_tokens": [1, 4]}}},
            "output_dir": str(tmp_path / "runs")}
    out = tmp_path / "tune"
    run_tune(parse_config(data), TuneOptions(out=out, skip_preflight=True))
    no_survivors()
    e = json.loads((out / "tune.json").read_text())["variants"]["ngram"]
    assert [e["concurrency"][c]["params"] for c in ("1", "4", "16")] == [{"num_tokens": 4}, {"num_tokens": 1}, None]
    assert e["concurrency"]["16"]["confirmed"]["outcome"] != "adopt"  # plain decoding wins at 16 in flight
    spec = e["schedule"]["speculative_config"]
    assert spec["method"] == "ngram" and spec["num_speculative_tokens"] == 4
    assert spec["num_speculative_tokens_per_batch_size"] == [[1, 1, 4], [2, 4, 1], [5, 16, 0]]
    assert e["ready_variant"]["params"]["per_batch_size"] == [[1, 1, 4], [2, 4, 1], [5, 16, 0]]
    dyn = e["dynamic_measured"]["confirmed"]
    assert e["dynamic_measured"]["variant"] == "ngram-dynamic"
    assert dyn["1"]["outcome"] == "adopt" and dyn["4"]["outcome"] == "adopt"
    assert 0.9 < dyn["16"]["speedup"] < 1.1  # k = 0 at 16 in flight: plain decoding's speed


def test_cli_prints_the_plan_and_honours_the_budget(tmp_path, model_dir, capsys) -> None:
    from specbench.cli import main
    from tests.conftest import write_config

    data = tune_config(model_dir, 8000)
    data["estimates"] = {"startup_s": 30, "per_request_tok_s": 30}
    data["engine"]["startup_timeout_s"] = 60  # not below the estimate (refused: every launch would time out)
    path = write_config(tmp_path / "t.yaml", data)
    assert main(["tune", str(path), "--plan"]) == 0
    out = capsys.readouterr().out
    # 4 settings: search-1 measures 4 + baseline in 1 launch each, search-2 at most 4 + baseline (2 per level,
    # 3 levels) in 2 launches each (launches double, not repeats), the confirmation at most 3 + baseline, 3
    # launches each (command engine: no dynamic variant): 5 + 10 + 12
    assert "search-1: 4 setting(s)" in out and "search-2: 4 setting(s)" in out and "confirm: 3 setting(s)" in out
    assert "1 repeat(s), 2 launch(es) each: 10 launches" in out
    assert "total: at most 27 launches" in out
    assert main(["tune", str(path), "--budget", "0.01"]) == 2
    assert "over --budget 0.01 h" in capsys.readouterr().err
    del data["tune"]
    assert main(["tune", str(write_config(tmp_path / "u.yaml", data))]) == 2
    assert "has no tune: section" in capsys.readouterr().err


def test_validate_checks_every_setting(tmp_path, model_dir, capsys) -> None:
    from specbench.cli import main
    from tests.conftest import write_config

    path = write_config(tmp_path / "t.yaml", tune_config(model_dir, 8000))
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "tune: ngram: 4 settings" in out and "variant ngram-num_tokens-8" in out


# -- resume and reuse ----------------------------------------------------------------------------------
def quick_tune_config(model_dir: Path, port: int, num_tokens: list[int]) -> dict:
    """The known answer's stand-in, one launch per setting at C=1 and 4: enough to exercise the rounds'
    bookkeeping (the choices come from the search rounds, which resume and reuse must not re-measure)."""
    data = tune_config(model_dir, port)
    data["sweep"].update({"concurrency": [1, 4], "launches": 1, "waves": 1})
    data["tune"]["variants"]["ngram"]["num_tokens"] = num_tokens
    return data


def statuses(round_dir: Path) -> dict[str, str]:
    state = json.loads((round_dir / "run.json").read_text())
    return {name: v["status"] for name, v in state["variants"].items()}


def choices(out: Path) -> dict[str, object]:
    """Per concurrency, the setting the search chose (its confirmed verdict aside: one launch decides little)."""
    levels = json.loads((out / "tune.json").read_text())["variants"]["ngram"]["concurrency"]
    return {c: e["candidate"]["params"] for c, e in levels.items()}


def test_resume_finishes_an_interrupted_tune_without_measuring_its_finished_rounds(tmp_path, model_dir, port,
                                                                                  no_survivors) -> None:
    cfg = parse_config(quick_tune_config(model_dir, port, [1, 2, 4, 8]))
    out = tmp_path / "tune"
    run_tune(cfg, TuneOptions(out=out, skip_preflight=True))
    first, searched = choices(out), (out / "search-1" / "requests.jsonl").read_bytes()
    # a crash during search-2: that round's directory holds part of it, the confirmation never started
    import shutil

    shutil.rmtree(out / "confirm")
    for f in ("tune.json", "tune.md", "tune.png"):
        (out / f).unlink()
    state = json.loads((out / "search-2" / "run.json").read_text())
    last = sorted(state["variants"])[-1]
    state["variants"][last]["status"] = "running"  # killed while measuring its last setting
    (out / "search-2" / "run.json").write_text(json.dumps(state))
    with pytest.raises(Exception, match="--resume"):
        run_tune(cfg, TuneOptions(out=out, skip_preflight=True))  # a fresh tune refuses the directory
    run_tune(cfg, TuneOptions(out=out, resume=True, skip_preflight=True))
    no_survivors()
    assert (out / "search-1" / "requests.jsonl").read_bytes() == searched  # not measured again
    assert set(statuses(out / "search-2").values()) <= {"done"} and set(statuses(out / "confirm").values()) <= {"done"}
    assert choices(out) == first


def test_reuse_takes_unchanged_settings_from_an_earlier_tune_and_measures_only_new_ones(tmp_path, model_dir, port,
                                                                                       no_survivors) -> None:
    earlier, later = tmp_path / "earlier", tmp_path / "later"
    run_tune(parse_config(quick_tune_config(model_dir, port, [1, 2, 4])), TuneOptions(out=earlier, skip_preflight=True))
    # the grid gains k = 8: search-1 measures only it; the baseline and k = 1, 2, 4 come from `earlier`
    run_tune(parse_config(quick_tune_config(model_dir, port, [1, 2, 4, 8])),
             TuneOptions(out=later, reuse=earlier, skip_preflight=True))
    no_survivors()
    got = statuses(later / "search-1")
    assert got == {"base": "reused", "ngram-num_tokens-1": "reused", "ngram-num_tokens-2": "reused",
                   "ngram-num_tokens-4": "reused", "ngram-num_tokens-8": "done"}
    assert choices(later) == choices(earlier) and choices(later)["1"] == {"num_tokens": 4}
