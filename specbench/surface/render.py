"""The surface's files: surface.csv, break_even_al.csv, surface.png and surface.md in the surface run's
directory; prediction.csv and prediction.md in a predicted run's directory."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from specbench.records.rundir import RunDir, atomic_write
from specbench.report.surface import break_even_text
from specbench.surface.predict import METHODS, PREDICTION_FILE, break_even_levels
from specbench.surface.table import BREAK_EVEN_FILE, SURFACE_FILE, break_even_table, curves, surface_table

FORCED_NOTE = ("Forced acceptance: the engine accepted drafts at the set rate whatever the target said, so these "
               "outputs are not the target's and their losslessness is not checked; only the cost of drafting and "
               "verifying at each acceptance length is measured.")


def _f(x: float, digits: int = 2) -> str:
    if not math.isfinite(x):
        return "beyond" if x == math.inf else "n/a"
    return f"{x:.{digits}f}"


def _interval(lo: float, hi: float, digits: int = 2) -> str:
    """`[lo, hi]`, or `none` when the points had no interval (one launch and no variance history)."""
    if math.isnan(lo) and math.isnan(hi):
        return "none"
    return f"[{_f(lo, digits)}, {_f(hi, digits)}]"


def surface_plot(surface: pd.DataFrame, be: pd.DataFrame, variant: str) -> bytes:
    """Speedup against forced acceptance length, one line (with its 95% band) per concurrency; each
    concurrency's break-even acceptance marked on the 1.0 line."""
    import io

    fig = Figure(figsize=(6.0, 4.0), layout="constrained")
    ax = fig.subplots()
    for i, (c, curve) in enumerate(sorted(curves(surface, variant).items())):
        color = f"C{i % 10}"
        ax.plot(curve.al, curve.speedup, marker="o", color=color, label=f"C={c}")
        ax.fill_between(curve.al, curve.low, curve.high, color=color, alpha=0.15)
        row = be[(be["variant"] == variant) & (be["concurrency"] == c)]
        if len(row) and math.isfinite(float(row["break_even_acceptance"].iloc[0])):
            ax.plot([float(row["break_even_acceptance"].iloc[0])], [1.0], marker="x", markersize=10, color=color)
    ax.axhline(1.0, color="0.3", linewidth=0.8, linestyle="--")
    ax.set_xlabel("forced acceptance length (tokens / target step)")
    ax.set_ylabel("speedup vs baseline")
    ax.set_title(f"{variant}: speedup surface (x: break-even acceptance)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


def surface_markdown(surface: pd.DataFrame, be: pd.DataFrame) -> str:
    lines = ["# Speedup surface", "", FORCED_NOTE, "",
             "Speedup S(C, AL) (geometric mean over the surface sweep's points, 95% interval); the acceptance the "
             "engine's counters read back next to the forced length.", ""]
    for v in sorted(surface["variant"].unique()):
        s = surface[surface["variant"] == v]
        lines += [f"## {v}", "", f"![surface](surface-{v}.png)", "",
                  "| C | forced AL | read back | speedup | 95% interval |", "| ---: | ---: | ---: | ---: | --- |"]
        for _, r in s.iterrows():
            flag = "" if r["readback"] == "ok" else f" ({r['readback']})"
            lines.append(f"| {int(r['concurrency'])} | {r['forced_acceptance']:g} | "
                         f"{_f(r['measured_acceptance'])}{flag} "
                         f"| {_f(r['speedup'], 3)} | {_interval(r['speedup_ci_low'], r['speedup_ci_high'], 3)} |")
        lines += ["", "Break-even acceptance (the AL at which the speedup reaches 1.0; `beyond`: not within the forced "
                  "lengths; `at most`: pays at the lowest forced length already; "
                  "extended: the last segment extended past the highest forced length, an extrapolation):", "",
                  "| C | break-even AL | 95% interval | extended |", "| ---: | ---: | --- | ---: |"]
        for _, r in be[be["variant"] == v].iterrows():
            value, interval = break_even_text(r)
            lines.append(f"| {int(r['concurrency'])} | {value} | {interval} | "
                         f"{_f(r['break_even_acceptance_extrapolated'])} |")
        lines.append("")
    bad = surface[surface["readback"] != "ok"]
    if len(bad):
        lines += ["**Warning**: the engine's acceptance did not read back as forced at "
                  + ", ".join(f"{r['variant']} AL {r['forced_acceptance']:g} C={int(r['concurrency'])} "
                              f"({_f(r['measured_acceptance'])})" for _, r in bad.iterrows())
                  + ": those points do not measure the length they name.", ""]
    return "\n".join(lines)


def write_surface(run_dir: Path) -> list[Path]:
    """From a finished surface run's cells.csv: surface.csv, break_even_al.csv, a plot per variant, surface.md."""
    from specbench.report.load import normalize_cells

    rd = RunDir(run_dir)
    cells = normalize_cells(pd.read_csv(rd.cells))
    surface = surface_table(cells)
    be = break_even_table(surface)
    out = [run_dir / SURFACE_FILE, run_dir / BREAK_EVEN_FILE, run_dir / "surface.md"]
    atomic_write(out[0], surface.to_csv(index=False))
    atomic_write(out[1], be.to_csv(index=False))
    for v in sorted(surface["variant"].unique()):
        png = run_dir / f"surface-{v}.png"
        atomic_write(png, surface_plot(surface, be, v))
        out.append(png)
    atomic_write(out[2], surface_markdown(surface, be))
    return out


def prediction_markdown(pred: pd.DataFrame, surface_dir: Path) -> str:
    lines = ["# Predicted from the speedup surface", "",
             f"Surface: `{surface_dir}`. `surface`: S(C, AL) at the acceptance each point measured at the reference "
             "concurrency; `at C`: the same with the acceptance measured at that concurrency (the difference is the "
             "acceptance's drift with load); `anchored`: the speedup the run measured at the reference concurrency "
             "times the surface's fall from there to C (docs/metrics.md, \"Speedup surface\"). **disagree**: a "
             "prediction's 95% interval and the measured one do not overlap.",
             "",
             "| variant | C | AL (ref) | AL at C | surface | 95% interval | at C | error | anchored | 95% interval "
             "| error | measured | 95% interval |",
             "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: | ---: | --- |"]
    for _, r in pred.iterrows():
        ext = " (extrapolated)" if r["extrapolated"] else ""
        lines.append(f"| {r['variant']} | {int(r['concurrency'])} | {_f(r['acceptance_ref'])} | "
                     f"{_f(r['acceptance_at_c'])} "
                     f"| {_f(r['predicted'], 3)}{ext} | [{_f(r['predicted_low'], 3)}, {_f(r['predicted_high'], 3)}] "
                     f"| {_f(r['predicted_at_c'], 3)} | {_pct(r['error'], r['disagree'])} "
                     f"| {_f(r['anchored'], 3)} | [{_f(r['anchored_low'], 3)}, {_f(r['anchored_high'], 3)}] "
                     f"| {_pct(r['anchored_error'], r['anchored_disagree'])} "
                     f"| {_f(r['measured'], 3)} | [{_f(r['measured_low'], 3)}, {_f(r['measured_high'], 3)}] |")
    lines += ["", "Break-even concurrency (first sweep level with speedup below 1.0):", ""]
    for method in METHODS:
        for v, (p, m, levels) in sorted(break_even_levels(pred, method).items()):
            name = lambda i, levels=levels: f"C={levels[i]}" if i < len(levels) else "beyond the sweep"  # noqa: E731
            lines.append(f"- {v} ({method}): predicted {name(p)}, measured {name(m)}"
                         + ("" if abs(p - m) <= 1 else " (**more than one level apart**)"))
    return "\n".join(lines) + "\n"


def _pct(error: float, disagree: bool) -> str:
    if not math.isfinite(error):
        return "n/a"
    return f"{100 * error:+.1f}%" + (" **disagree**" if disagree else "")


def write_prediction(run_dir: Path, surface_dir: Path, mapping: dict[str, str] | None = None,
                     reference: int | None = None) -> tuple[pd.DataFrame, list[Path]]:
    """prediction.csv and prediction.md in a run's directory, from its cells.csv and a surface."""
    from specbench.config import load_yaml, parse_config
    from specbench.report.load import normalize_cells
    from specbench.surface.predict import predict_run
    from specbench.surface.table import load_surface

    rd = RunDir(run_dir)
    cfg = parse_config(load_yaml(rd.config.read_text(), str(rd.config)), str(rd.config))
    pred = predict_run(normalize_cells(pd.read_csv(rd.cells)), cfg.baseline.name, load_surface(surface_dir),
                       mapping, reference)
    out = [run_dir / PREDICTION_FILE, run_dir / "prediction.md"]
    atomic_write(out[0], pred.to_csv(index=False))
    atomic_write(out[1], prediction_markdown(pred, surface_dir))
    return pred, out
