"""variants[].max_concurrency: a variant whose server runs at most N requests at once is measured at the
points with concurrency <= N only; the points above are "not measured" (n/m) everywhere downstream, never
failures. Matrix tests run the stand-in through engine kind command (fast, deterministic)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from specbench.config import parse_config
from specbench.metrics.breakeven import capped_verdict
from specbench.plan.windows import SweepPoint, capped_variants, measured, variant_points
from specbench.pricing.planner import make_plan
from specbench.report.compare import compare
from specbench.report.plan_text import render
from specbench.runner import RunOptions, run_matrix
from specbench.server.launch import make_engine, plan_launches
from tests.conftest import standin_config
from tests.report.test_verdict import LOSE, WIN, curve_rows, verdict

VARIANTS = [{"name": "base", "drafter": "autoregressive", "baseline": True},
            {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 3}},
            {"name": "capped", "drafter": "ngram", "params": {"num_tokens": 3}, "max_concurrency": 1}]


def _run(data: dict[str, Any], out: Path, **opts: Any) -> dict[str, str]:
    return run_matrix(parse_config(data), RunOptions(out=out, skip_preflight=True, **opts)).status


def _measured(out: Path) -> pd.DataFrame:
    rows = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    return pd.DataFrame([r for r in rows if not r["warmup"]])


def test_capped_variant_measures_only_its_points_and_reports_the_rest_not_measured(tmp_path, model_dir, port,
                                                                                    no_survivors):
    data = standin_config(model_dir, port, variants=VARIANTS, sweep={"concurrency": [1, 2]})
    assert _run(data, tmp_path / "a") == {"base": "done", "ngram": "done", "capped": "done"}
    reqs = _measured(tmp_path / "a")
    # no request of the capped variant above its cap; the uncapped variants send every point as before
    assert sorted(reqs[reqs.variant == "capped"].concurrency.unique()) == [1]
    for v in ("base", "ngram"):
        # 2 prompts: one pass at C=1, 3 passes at C=2 (6 requests needed: plan.windows.level_requests)
        assert reqs[reqs.variant == v].concurrency.value_counts().to_dict() == {1: 2, 2: 6}
    cells = pd.read_csv(tmp_path / "a" / "cells.csv")
    assert cells.groupby("variant").concurrency.apply(sorted).to_dict() == {"base": [1, 2], "capped": [1],
                                                                             "ngram": [1, 2]}
    assert cells["valid"].all() and cells.loc[cells.variant == "capped", "speedup"].notna().all()
    meta = json.loads((tmp_path / "a" / "run.json").read_text())
    assert meta["variants"]["capped"]["status"] == "done"

    md = (tmp_path / "a" / "report.md").read_text()
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in md.split("## Verdict")[1].split("\n\n")[1].splitlines()[2:]}
    assert rows["capped"][1] == "n/m" and rows["capped"][0] != "n/m"
    assert "n/m" not in rows["ngram"]
    assert md.count("n/m = not measured") == 1  # explained once
    assert "not measured above C=1 (max_concurrency" in md  # the capped drafter's verdict line
    speedups = md.split("### capped")[1].split("###")[0]
    assert "| n/m |" in speedups
    # break-even: whatever the stand-in's noisy speedup decides, the capped row says where it stops measuring
    be = pd.read_csv(tmp_path / "a" / "break_even.csv").set_index("variant")["verdict"]
    assert "C=1" in be["capped"] and "max_concurrency" in be["capped"] and "beyond the sweep" not in be["capped"]
    assert "max_concurrency" not in be["ngram"]
    assert "capped (max_concurrency): capped at concurrency \\<= 1 only" in md  # fairness audit
    assert "n/m" in (tmp_path / "a" / "report.html").read_text()
    fairness = json.loads((tmp_path / "a" / "fairness.json").read_text())
    assert any("capped at concurrency <= 1" in n for n in fairness["notes"])

    # resume of the finished run: nothing to measure, the capped variant stays done
    n = len(_measured(tmp_path / "a"))
    assert _run(data, tmp_path / "a", resume=True)["capped"] == "done"
    assert len(_measured(tmp_path / "a")) == n

    # reuse: the uncapped variants are reused; the capped one without its cap is another measurement
    uncapped = copy.deepcopy(data)
    del uncapped["variants"][2]["max_concurrency"]
    assert _run(uncapped, tmp_path / "b", reuse=tmp_path / "a") == {"base": "reused", "ngram": "reused",
                                                                    "capped": "done"}
    cmp = compare(tmp_path / "a", tmp_path / "b")
    only = [c for c in cmp.changes if c.status == "only_b"]
    assert [(c.variant, c.reason) for c in only] == [
        ("capped", "only in B (not measured in A: max_concurrency 1)")]
    no_survivors()


FP_CONFIG: dict[str, Any] = {
    "name": "fp", "model": {"path": "/models/m", "served_name": "m"},
    "engine": {"kind": "command", "port": 8123,
               "command": ["serve", "--model", "{model}", "--port", "{port}", "--name", "{served_name}"]},
    "variants": [{"name": "base", "drafter": "autoregressive", "baseline": True},
                 {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 3}}],
    "sweep": {"prompts": [{"set": "seed"}], "output_lens": [8], "concurrency": [1, 2]}}


def _fingerprints(data: dict[str, Any]) -> dict[str, str]:
    cfg = parse_config(data)
    return {la.name: la.fingerprint() for la in plan_launches(cfg, make_engine(cfg, "/models/m", "m"))}


def test_an_uncapped_variant_keeps_its_fingerprint_and_a_cap_changes_it():
    # computed with main before max_concurrency existed: earlier runs stay reusable
    assert _fingerprints(FP_CONFIG) == {"base": "789172bca57ff027", "ngram": "4c20e537e4a270cb"}
    capped = copy.deepcopy(FP_CONFIG)
    capped["variants"][1]["max_concurrency"] = 1
    fps = _fingerprints(capped)
    assert fps["base"] == "789172bca57ff027" and fps["ngram"] != "4c20e537e4a270cb"
    capped["variants"][1]["max_concurrency"] = 2
    assert _fingerprints(capped)["ngram"] not in (fps["ngram"], "4c20e537e4a270cb")


def test_plan_prices_a_capped_variant_at_its_points_only():
    data = copy.deepcopy(FP_CONFIG)
    data["variants"].append({"name": "capped", "drafter": "ngram", "max_concurrency": 1})
    data["sweep"] = {"prompts": [{"set": "seed", "categories": ["code"]}], "output_lens": [600],
                     "concurrency": [1, 4]}
    data["estimates"] = {"startup_s": 60, "per_request_tok_s": 10}
    p = make_plan(parse_config(data), None)
    # one repeat: 600 tokens at 10 tok/s = 60 s a wave; a window is the passes of the 3 code prompts its level
    # needs (1 pass at C=1: 3 waves; 4 passes at C=4, 12 requests: 3 waves): uncapped 180 + 180 s, capped
    # 180 s; plus 60 s startup
    assert p.cost_of("ngram") == pytest.approx(420) and p.cost_of("capped") == pytest.approx(240)
    assert p.total_s == pytest.approx(1080)
    text = render(p)
    assert "  capped: 4.0 min (1 points: max_concurrency 1, the points above it are not measured)" in text
    assert "  ngram: 7.0 min\n" in text and "total: 18.0 min one after another" in text


def test_measured_points_follow_the_cap():
    data = copy.deepcopy(FP_CONFIG)
    data["sweep"]["concurrency"] = [1, 4, 16]
    data["variants"][1]["max_concurrency"] = 4
    cfg = parse_config(data)

    def at(c: int) -> SweepPoint:
        return SweepPoint(category="code", input_len=None, output_len=8, concurrency=c, temperature=0.0)

    assert [measured(cfg.variants, "ngram", at(c)) for c in (1, 4, 16)] == [True, True, False]
    assert [measured(cfg.variants, "base", at(c)) for c in (1, 4, 16)] == [True, True, True]
    assert capped_variants(cfg.variants, cfg.sweep.concurrency) == {"ngram": 4}
    data["variants"][1]["max_concurrency"] = 16  # at the top of the sweep: caps nothing
    assert capped_variants(parse_config(data).variants, parse_config(data).sweep.concurrency) == {}


def test_variant_points_keep_the_sweep_order():
    from specbench.plan.windows import Sweep

    data = copy.deepcopy(FP_CONFIG)
    data["variants"][1]["max_concurrency"] = 2
    data["sweep"]["concurrency"] = [1, 2, 8]
    cfg = parse_config(data)
    pts = [SweepPoint(category=c, input_len=None, output_len=8, concurrency=k, temperature=0.0)
           for k in (1, 2, 8) for c in ("a", "b")]
    sweep = Sweep(points=pts, prompts={}, padded={})
    assert [(p.category, p.concurrency) for p in variant_points(cfg.variants, sweep, "ngram")] == [
        ("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    assert variant_points(cfg.variants, sweep, "base") == pts


def test_capped_break_even_verdicts():
    pays = "pays at all 2 measured levels (beyond the sweep; no interval)"
    assert capped_verdict("pays_everywhere", pays, None) == pays
    assert capped_verdict("pays_everywhere", pays, 4) == (
        "pays at all 2 measured levels (up to C=4, its max_concurrency: not measured above; no interval)")
    assert capped_verdict("never_pays", "never pays", 4) == "never pays; not measured above C=4 (max_concurrency)"


def test_a_cap_is_kept_in_the_resolved_config():
    from specbench.config import dump_config, load_yaml

    data = copy.deepcopy(FP_CONFIG)
    data["variants"][1]["max_concurrency"] = 1
    again = parse_config(load_yaml(dump_config(parse_config(data)), "config.yaml"))
    assert again.variant("ngram").max_concurrency == 1 and again.variant("base").max_concurrency is None
    assert "max_concurrency" not in dump_config(parse_config(FP_CONFIG))  # unset: not written


CAPPED_CONFIG = {"sweep": {"concurrency": [1, 2, 4, 8]},
                 "variants": [{"name": "base", "baseline": True}, {"name": "spec", "max_concurrency": 2}]}
CAP_WORDS = "; not measured above C=2 (max_concurrency: its server runs at most 2 at once)"


@pytest.mark.parametrize("calls,start", [((LOSE, LOSE), "**spec** never pays"),
                                         ((WIN, WIN), "adopt **spec** at every measured concurrency (up to 2)")])
def test_the_verdict_line_of_a_capped_variant_says_where_it_stops(calls, start):
    text, _ = verdict(curve_rows(calls, levels=(1, 2)), config=CAPPED_CONFIG)
    assert text.startswith(start) and text.endswith(CAP_WORDS)
    uncapped, _ = verdict(curve_rows(calls, levels=(1, 2)), config={"sweep": {"concurrency": [1, 2, 4, 8]}})
    assert "max_concurrency" not in uncapped


def test_verdict_table_tells_not_measured_from_missing():
    from specbench.report.decisions import legend, verdict_table
    from specbench.report.derived import RunData

    rows = (curve_rows((WIN, WIN)) + curve_rows((WIN, WIN, WIN), variant="other")
            + curve_rows(((1.0, 1.0, 1.0),) * 4, variant="base"))
    config = {**CAPPED_CONFIG, "variants": [*CAPPED_CONFIG["variants"], {"name": "other"}]}
    data = RunData(path=Path("."), meta={"baseline": "base", "variants": {v: {"status": "done"} for v in
                                                                          ("base", "spec", "other")}},
                   environment={}, config=config, fairness=None, cells=pd.DataFrame(rows), break_even=pd.DataFrame())
    table = verdict_table(data)
    assert table is not None
    by = {r[0]: r[1:] for r in table.rows}
    assert by["spec"] == ["adopt", "adopt", "n/m", "n/m"]  # above its cap: not measured, by design
    assert by["other"] == ["adopt", "adopt", "adopt", "-"]  # no cell at C=8 and no cap: missing
    assert legend(data).endswith("n/m = not measured: the variant's server runs at most max_concurrency requests at "
                                 "once (spec 2), so the points above it were not measured for it (not a failure).")
