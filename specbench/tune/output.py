"""What `specbench tune` leaves in its directory: tune.json, tune.md (the report section) and tune.png.

Per tuned variant and concurrency: the setting the search chose, its search-split speedup (biased upward:
it is the best of several noisy estimates), the confirmed speedup on the held-out prompts with the envelope
of its points' 95% intervals (lowest low, highest high: not itself a 95% interval), the verdict's word there,
a warning where the setting sits at the edge of its grid, and the chosen params, null unless that word is
"adopt" (the interval clears verdict.min_speedup). Then the schedule as the engine takes it and a ready variant.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from specbench.config import RunConfig
from specbench.records.rundir import atomic_write
from specbench.server.engines import ENGINES
from specbench.tune.result import TuneResult, launch_argv, param_names, score, search_score, spec_k
from specbench.tune.schedule import Range, flag_sets, ranges, vllm_schedule

DYNAMIC_NOTE = ("vLLM dynamic speculative decoding (num_speculative_tokens_per_batch_size): one launch switches "
                "k by the number of scheduled requests")


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), 4)


def confirmed_words(confirm_dir: Path) -> dict[str, dict[int, str]]:
    """variant -> {concurrency: the verdict table's word} of the confirmation run (report/decisions.py)."""
    from specbench.report.decisions import verdict_table
    from specbench.report.derived import load_report_data

    table = verdict_table(load_report_data(confirm_dir))
    if table is None:
        return {}
    levels = [int(h.removeprefix("C=")) for h in table.columns[1:]]
    return {str(row[0]): {c: str(w) for c, w in zip(levels, row[1:])} for row in table.rows}


def confirmed(cells: pd.DataFrame, variant: str, concurrency: int) -> dict[str, Any]:
    """The confirmation's speedup at one level: the geometric mean over the level's points, and the
    envelope of the points' 95% intervals (lowest low, highest high)."""
    c = cells[(cells["variant"] == variant) & (cells["concurrency"] == concurrency) & cells["valid"].astype(bool)]
    low = pd.to_numeric(c["speedup_ci_low"], errors="coerce")
    high = pd.to_numeric(c["speedup_ci_high"], errors="coerce")
    return {"speedup": _num(score(cells, variant, concurrency)), "ci_low": _num(low.min()) if len(c) else None,
            "ci_high": _num(high.max()) if len(c) else None, "points": int(len(c))}


def grid_edge(grid: dict[str, list[Any]], params: dict[str, Any]) -> list[str]:
    """The params of a winner that sit at the edge of their (numeric) grid: a value beyond it, never tried,
    may be better. `num_tokens=8 (the largest tried)`."""
    out = []
    for k, values in grid.items():
        nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(set(nums)) < 2 or k not in params or params[k] not in nums:
            continue
        if params[k] == max(nums):
            out.append(f"{k}={params[k]} (the largest tried)")
        elif params[k] == min(nums):
            out.append(f"{k}={params[k]} (the smallest tried)")
    return out


def build(cfg: RunConfig, res: TuneResult) -> dict[str, Any]:
    assert res.confirm is not None
    by_name = {s.name: s for ss in res.grid.values() for s in ss}
    words = confirmed_words(res.confirm.run_dir)
    argv = launch_argv([*res.rounds, res.confirm])
    out: dict[str, Any] = {"min_speedup": cfg.verdict.min_speedup, "engine": cfg.engine.kind,
                           "rounds": [str(r.run_dir.name) for r in res.rounds], "confirm": res.confirm.run_dir.name,
                           "variants": {}}
    for tuned in res.grid:
        levels: dict[str, Any] = {}
        choices: dict[int, str | None] = {}
        for c in cfg.sweep.concurrency:
            final = res.final[(tuned, c)]
            word = words.get(final, {}).get(c, "undecided")
            choices[c] = final if word == "adopt" else None
            levels[str(c)] = {
                "params": by_name[final].params if word == "adopt" else None,
                "candidate": {"variant": final, "params": by_name[final].params},
                "grid_edge": grid_edge(cfg.tune.variants[tuned] if cfg.tune else {}, by_name[final].params),
                "search_speedup": _num(search_score(res, tuned, c)),
                "confirmed": {**confirmed(res.confirm.cells, final, c), "outcome": word},
                "search": [{"round": r, "variant": n, "speedup": _num(s)}
                           for r, n, s in res.scores.get((tuned, c), [])],
            }
        rs = ranges(choices)
        entry: dict[str, Any] = {"concurrency": levels, "ranges": [
            {"concurrency": [r.start, r.end], "params": by_name[r.choice].params if r.choice else None} for r in rs]}
        entry["schedule"], entry["ready_variant"] = schedule_entry(cfg, tuned, rs, argv, by_name)
        if tuned in res.dynamic:
            dyn = res.dynamic[tuned]
            entry["dynamic_measured"] = {
                "variant": dyn, "params": res.dynamic_params[tuned],
                "confirmed": {str(c): {**confirmed(res.confirm.cells, dyn, c),
                                       "outcome": words.get(dyn, {}).get(c, "undecided")}
                              for c in cfg.sweep.concurrency}}
        out["variants"][tuned] = entry
    return out


def schedule_entry(cfg: RunConfig, tuned: str, rs: list[Range], argv: dict[str, list[str]],
                   by_name: dict[str, Any]) -> tuple[dict[str, Any] | None, Any]:
    """(the schedule as the engine takes it, a ready variant for the config's variants list)."""
    base = next(v for v in cfg.variants if v.name == tuned)
    chosen = {r.choice for r in rs if r.choice}
    if not chosen:
        return None, None
    kind = cfg.engine.kind
    if ENGINES.get(kind).dynamic_schedule:
        spec, why = vllm_schedule(rs, argv)
        if spec is not None:
            top = by_name[max(chosen, key=lambda n: spec_k(argv.get(n, [])))]
            variant: dict[str, Any] = {"name": f"{tuned}-tuned", "drafter": base.drafter,
                                       "params": {**base.params, **top.params}}
            if len(rs) > 1 or None in {r.choice for r in rs}:
                if "per_batch_size" not in param_names(base.drafter):
                    return {"kind": kind, "note": DYNAMIC_NOTE, "speculative_config": spec}, None
                variant["params"]["per_batch_size"] = spec["num_speculative_tokens_per_batch_size"]
            return {"kind": kind, "note": DYNAMIC_NOTE, "speculative_config": spec}, variant
        return {"kind": kind, "note": why, "per_range": flag_sets(rs, argv)}, None
    sets = flag_sets(rs, argv)
    if len(chosen) == 1 and all(r.choice for r in rs):
        only = by_name[next(iter(chosen))]
        return {"kind": kind, "per_range": sets}, {"name": f"{tuned}-tuned", "drafter": base.drafter,
                                                             "params": {**base.params, **only.params}}
    # the engine does not switch at run time: one launch (one variant) per concurrency range
    return {"kind": kind, "note": "one launch per concurrency range", "per_range": sets}, [
        {"name": f"{tuned}-c{r.start}-{r.end}", "drafter": base.drafter,
         "params": {**base.params, **by_name[r.choice].params}}
        for r in rs if r.choice]


def markdown(cfg: RunConfig, data: dict[str, Any], plot: bool) -> str:
    lines = [f"# Tuning: {cfg.name}", "",
             f"Successive halving per concurrency on the search split of the prompts ({', '.join(data['rounds'])}), "
             f"then the last setting standing against the baseline on the held-out prompts ({data['confirm']}). "
             f"Chosen: the confirmed verdict is adopt (the interval clears {data['min_speedup']:g}); otherwise "
             "plain decoding (null). The search-split speedup is the best of several noisy estimates, so it "
             "overstates: its gap to the confirmed speedup is the winner's curse.", ""]
    for tuned, e in data["variants"].items():
        lines += [f"## {tuned}", "", "| C | setting | search speedup | confirmed speedup | envelope of the points' "
                  "95% intervals | verdict | chosen |",
                  "| ---: | --- | ---: | ---: | --- | --- | --- |"]
        for c, lv in e["concurrency"].items():
            conf = lv["confirmed"]
            lo, hi = conf["ci_low"], conf["ci_high"]
            label = ", ".join(f"{k}={v}" for k, v in lv["candidate"]["params"].items())
            lines.append(f"| {c} | {label} | {_fmt(lv['search_speedup'])} | {_fmt(conf['speedup'])} | "
                         f"{'-' if lo is None else f'{lo:.3f}-{hi:.3f}'} | {conf['outcome']} | "
                         f"{'plain decoding' if lv['params'] is None else label} |")
        lines.append("")
        edges = [f"⚠ C={c}: the setting standing sits at the edge of the grid ({', '.join(lv['grid_edge'])}): a "
                 "value beyond it was never tried and may be better; widen the grid."
                 for c, lv in e["concurrency"].items() if lv.get("grid_edge")]
        lines += [*edges, ""] if edges else []
        if e.get("dynamic_measured"):
            d = e["dynamic_measured"]
            lines.append(f"Dynamic schedule measured as `{d['variant']}` (per_batch_size "
                         f"{d['params'].get('per_batch_size')}): " + "; ".join(
                             f"C={c} {_fmt(v['speedup'])} ({v['outcome']})" for c, v in d["confirmed"].items()))
            lines.append("")
        if e["schedule"] is not None:
            lines += ["Schedule (as the engine takes it):", "", "```", *schedule_lines(e["schedule"]), "```", ""]
        if e["ready_variant"] is not None:
            lines += ["Ready variant:", "", "```yaml", yaml.safe_dump({"variants": e["ready_variant"] if isinstance(
                e["ready_variant"], list) else [e["ready_variant"]]}, sort_keys=False).rstrip(), "```", ""]
        else:
            lines += ["No setting is adopted at any concurrency: keep plain decoding.", ""]
    if plot:
        lines += ["![speedup vs concurrency, one line per setting, the chosen envelope](tune.png)", ""]
    return "\n".join(lines)


def schedule_lines(sched: dict[str, Any]) -> list[str]:
    """vLLM: the one --speculative-config to launch with; otherwise one line of flags per range."""
    if "speculative_config" in sched:
        return [f"--speculative-config '{json.dumps(sched['speculative_config'], separators=(',', ':'))}'"]
    return [f"C {r['concurrency'][0]}-{r['concurrency'][1]}: " + (" ".join(r["args"]) or
            ("plain decoding" if r["setting"] is None else f"the launch of {r['setting']}"))
            for r in sched["per_range"]]


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}x"


def figure(cfg: RunConfig, res: TuneResult, data: dict[str, Any]) -> bytes | None:
    """Speedup vs concurrency on the search split (first round: every setting at every level), one line
    per setting; the chosen envelope (confirmed speedup, 1.0 where plain decoding is kept) in black."""
    from matplotlib.figure import Figure

    from specbench.report.plots import figure_png, label, log2_x

    if not res.rounds:
        return None
    first = res.rounds[0].cells
    levels = sorted(cfg.sweep.concurrency)
    fig = Figure(figsize=(5.5 * len(res.grid), 3.6), layout="constrained")
    axes = fig.subplots(1, len(res.grid), squeeze=False)[0]
    for ax, (tuned, ss) in zip(axes, res.grid.items()):
        for s in ss:
            ys = [score(first, s.name, c) for c in levels]
            ax.plot(levels, ys, marker="o", lw=1, alpha=0.8, label=label(s.label()))
        env = data["variants"][tuned]["concurrency"]
        ys = [(env[str(c)]["confirmed"]["speedup"] or math.nan) if env[str(c)]["params"] is not None else 1.0
              for c in levels]
        ax.plot(levels, ys, color="black", lw=2.5, marker="s", label="chosen (confirmed)")
        ax.axhline(1.0, color="0.3", lw=0.8, ls="--")
        ax.axhline(cfg.verdict.min_speedup, color="0.6", lw=0.8, ls=":")
        log2_x(ax, levels)
        ax.set_title(label(tuned))
        ax.set_xlabel("concurrency")
        ax.set_ylabel("speedup (search split)")
        ax.legend(fontsize=8)
    return figure_png(fig)


def write_outputs(cfg: RunConfig, res: TuneResult) -> list[Path]:
    data = build(cfg, res)
    d = res.tune_dir
    atomic_write(d / "tune.json", json.dumps(data, indent=1, default=str) + "\n")
    png = figure(cfg, res, data)
    if png is not None:
        (d / "tune.png").write_bytes(png)
    atomic_write(d / "tune.md", markdown(cfg, data, png is not None))
    return [d / "tune.json", d / "tune.md"] + ([d / "tune.png"] if png else [])


def summary(tune_dir: Path) -> dict[str, str]:
    """Per tuned variant, one line from its tune.json: the chosen params per concurrency."""
    data = json.loads((tune_dir / "tune.json").read_text())
    return {tuned: "; ".join(f"C={c}: {lv['params'] if lv['params'] is not None else 'plain decoding'}"
                             for c, lv in e["concurrency"].items())
            for tuned, e in data["variants"].items()}
