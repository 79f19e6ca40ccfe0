"""What the run ran on and how it went: fairness, hardware, warnings, status, environment.
RunData -> blocks."""

from __future__ import annotations

from typing import Any

import pandas as pd

from specbench.decide.hardware import check_saved
from specbench.metrics.warnings import warning_rows
from specbench.report.derived import RunData
from specbench.report.document import Block, Bullets, Code, Heading, Paragraph, Strong, Table
from specbench.report.fmt import UNDEFINED, fmt


def gpus_text(env: dict[str, Any]) -> str:
    names = [str(g.get("name", g)) if isinstance(g, dict) else str(g) for g in env.get("gpus") or []]
    if not names:
        return "no GPU"
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return ", ".join(f"{k} ×{c}" if c > 1 else k for k, c in counts.items())


def fairness_section(data: RunData) -> list[Block]:
    f = data.fairness
    out: list[Block] = [Heading("Fairness audit")]
    if f is None:
        return out + [Paragraph(["No fairness audit in this run (fairness.json is missing)."], "warn")]
    ok = bool(f.get("ok"))
    out.append(Paragraph(["All variants share the pinned launch settings; only the drafter differs." if ok else
                          "The variants' launch settings differ beyond the drafter: the comparison may be unfair."],
                         "good" if ok else "bad"))
    diffs = f.get("differences") or []
    if diffs:
        out.append(Table(["setting", "variants", "values"],
                         [[str(d.get("what", "")), _text(d.get("variants")), _text(d.get("values"))] for d in diffs],
                         caption="Differences"))
    pinned = f.get("pinned") or {}
    if pinned:
        out.append(Table(["flag", "value"], [[str(k), _text(v)] for k, v in pinned.items()],
                         caption="Pinned for every variant"))
    if f.get("prefix_caching"):  # runs before issue 41 did not pin it and have no line
        pc = str(f["prefix_caching"])
        out.append(Paragraph([f"Prefix caching: {pc}"], "" if pc.startswith("off for every") else "warn"))
    notes = [str(n) for n in f.get("notes") or []]
    if notes:
        out.append(Bullets([[n] for n in notes], "note"))
    return out


def hardware_section(data: RunData) -> list[Block]:
    """Which node served which variant, and whether their fingerprints allow comparing them."""
    env = data.environment
    nodes: dict[str, dict[str, Any]] = env.get("nodes") or {}
    placement: dict[str, list[str]] = env.get("variant_nodes") or {}
    if env.get("server_hardware"):  # an external endpoint: nothing here saw the server
        return [Heading("Hardware"), Paragraph([f"The server is an endpoint specbench did not launch; its hardware: "
                                                f"{env['server_hardware']}. The host, CPU and GPUs under Environment "
                                                f"are the client's."], "warn")]
    if not nodes:
        return []
    result = check_saved(env, data.config, data.baseline)
    out: list[Block] = [Heading("Hardware")]
    if not result.mismatched:
        out.append(Paragraph([f"Every variant was measured on hardware with the same fingerprint "
                              f"({len(nodes)} node{'s' if len(nodes) != 1 else ''})."], "good"))
    elif result.allowed:
        out.append(Paragraph([Strong("Compared across unlike hardware"), " (scheduler.allow_mixed_hardware: true): "
                              "these speedups mix the drafter with the hardware."], "warn"))
        out.append(Bullets([[Code(v), f": {why}"] for v, why in result.mismatched.items()], "warn"))
    else:
        out.append(Paragraph([Strong("Speedups withheld"), " for variants measured on hardware unlike the "
                              "baseline's: measure them on nodes like the baseline's, or set "
                              "scheduler.allow_mixed_hardware: true to compare anyway."], "bad"))
        out.append(Bullets([[Code(v), f": {why}"] for v, why in result.mismatched.items()], "bad"))
    served: dict[str, list[str]] = {}
    for variant, names in placement.items():
        for n in names:
            served.setdefault(n, []).append(variant)
    rows = [[name, ", ".join(served.get(name, [])), _text(fp.get("cpu")), _text(fp.get("gpu_model")) or "no GPU",
             _text(fp.get("gpu_count")), _text(fp.get("cuda")), _text(fp.get("driver")),
             _text(fp.get("engine_version"))] for name, fp in nodes.items()]
    out.append(Table(["node", "variants", "CPU", "GPU", "GPUs", "CUDA", "driver", "engine"], rows,
                     caption="Node fingerprints (environment.json has the GPU topology too)"))
    return out


def _text(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_text(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(_text(x) for x in v)
    return "" if v is None else str(v)


def failure_lines(errors: pd.DataFrame, top: int = 3) -> list[str]:
    """Per variant, its most frequent failure reasons with counts (errors.csv), e.g.
    `ngram: 4 requests failed: 3 x token count mismatch: ...; 1 x output length 96 tokens, 32 requested`."""
    if errors.empty or not {"variant", "reason", "requests"} <= set(errors.columns):
        return []
    out = []
    for variant, g in errors.groupby("variant", sort=True):
        g = g.sort_values("requests", ascending=False, kind="stable")
        shown = "; ".join(f"{int(n)} x {r}" for r, n in zip(g["reason"][:top], g["requests"][:top]))
        rest = len(g) - top
        out.append(f"{variant}: {int(g['requests'].sum())} request(s) failed: {shown}"
                   + (f"; {rest} other reason(s) (errors.csv)" if rest > 0 else ""))
    return out


def warnings_section(data: RunData) -> list[Block]:
    run_w = [str(w) for w in data.meta.get("warnings") or []]
    rows = sorted(warning_rows(data.cells.to_dict("records")), key=lambda w: w.code)
    out: list[Block] = [Heading("Warnings")]
    if not run_w and not rows and data.errors.empty:
        return out + [Paragraph(["None."], "good")]
    if run_w:
        out.append(Bullets([[w] for w in run_w], "warn"))
    if failed := failure_lines(data.errors):
        out.append(Paragraph(["Why requests failed (the most frequent reasons per variant, from requests.jsonl's "
                              "error):"], "warn"))
        out.append(Bullets([[line] for line in failed], "warn"))
    if rows:
        out.append(Table(["cell warning", "cells", "examples", "measured (first cell)", "remedy"],
                         [[w.code, str(len(w.cells)),
                           ", ".join(w.cells[:3]) + (f" (+{len(w.cells) - 3} more)" if len(w.cells) > 3 else ""),
                           w.detail or UNDEFINED, w.remedy or UNDEFINED] for w in rows],
                         numeric=frozenset({1})))
    return out


def status_section(data: RunData) -> list[Block]:
    rows = []
    for name, v in data.variants.items():
        status = str(v.get("status") or "unknown")
        note = ""
        if status == "failed":
            note = str(v.get("reason") or "no reason recorded")
        elif status == "reused":
            note = f"reused from run {v.get('reused_from') or '(unknown)'}, not measured again"
        elif v.get("reason"):
            note = str(v["reason"])
        rows.append([name + (" (baseline)" if name == data.baseline else ""), str(v.get("drafter") or ""), status,
                     fmt(v.get("wall_s"), 0), fmt(v.get("startup_s"), 0), note])
    return [Heading("Variants"), Table(["variant", "drafter", "status", "wall s", "startup s", "note"], rows,
                                       numeric=frozenset({3, 4}))]


def environment_section(data: RunData) -> list[Block]:
    env = data.environment
    if not env:
        return [Heading("Environment"), Paragraph(["environment.json is missing."], "warn")]
    engine = env.get("engine") or {}
    rows = [["host", _text(env.get("host"))], ["platform", _text(env.get("platform"))],
            ["CPU", _text(env.get("cpu"))], ["GPUs", gpus_text(env)], ["python", _text(env.get("python"))],
            ["engine", f"{engine.get('kind', '')} {engine.get('version') or '(version unknown)'}"],
            ["specbench", _text(env.get("specbench_version"))]]
    rows += [[f"drafter {k}", _text(v)] for k, v in (env.get("drafters") or {}).items()]
    known = {"host", "platform", "cpu", "gpus", "python", "engine", "specbench_version", "drafters", "nodes",
             "variant_nodes"}  # the last two: the Hardware section
    rows += [[k, _text(v)] for k, v in env.items() if k not in known]
    return [Heading("Environment"), Table(["item", "value"], rows)]
