"""The surface's files: surface.csv, break_even_al.csv, surface.png and surface.md in the surface run's
directory; prediction.csv and prediction.md in a predicted run's directory."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from specbench.records.rundir import RunDir, atomic_write
from specbench.report.surface_section import break_even_text, group_text, lengths_text
from specbench.surface.predict import PREDICTION_FILE, break_even_levels
from specbench.surface.table import (
    BREAK_EVEN_FILE,
    SURFACE_FILE,
    break_even_table,
    group_curves,
    is_profile,
    surface_table,
    untail,
)

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


def _label(key: tuple[int, float, float]) -> str:
    return f"C={key[0]} {lengths_text(key[1], key[2])}".strip()


def surface_plot(surface: pd.DataFrame, be: pd.DataFrame, variant: str) -> bytes:
    """Speedup against forced acceptance length: per concurrency (and output length) the measured points and
    the time model through them (with the models through the interval ends as a band); each break-even
    acceptance marked on the 1.0 line."""
    import io

    import numpy as np

    fig = Figure(figsize=(6.0, 4.0), layout="constrained")
    ax = fig.subplots()
    for i, (key, curve) in enumerate(group_curves(surface, variant).items()):
        if not len(curve):
            continue
        color = f"C{i % 10}"
        xs = np.linspace(curve.al[0], curve.al[-1], 50)
        ax.plot(curve.al, curve.speedup, marker="o", linestyle="none", color=color)
        ax.plot(xs, [curve.at(x) for x in xs], color=color, label=_label(key))
        ax.fill_between(xs, [curve.at(x, "low") for x in xs], [curve.at(x, "high") for x in xs], color=color,
                        alpha=0.15)
        a_star = _be_row(be, variant, key)
        if a_star is not None and math.isfinite(a := float(a_star["break_even_acceptance"])):
            ax.plot([a], [1.0], marker="x", markersize=10, color=color)
    ax.axhline(1.0, color="0.3", linewidth=0.8, linestyle="--")
    ax.set_xlabel("forced acceptance length (tokens / target step)")
    ax.set_ylabel("speedup vs baseline")
    ax.set_title(f"{variant}: speedup surface, time model (x: break-even acceptance)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


def _same(x: object, y: float) -> bool:
    fx = float(x)  # type: ignore[arg-type]
    return (math.isnan(fx) and math.isnan(y)) or fx == y


def _be_row(be: pd.DataFrame, variant: str, key: tuple[int, float, float]) -> pd.Series | None:
    for _, r in be[(be["variant"] == variant) & (be["concurrency"] == key[0])].iterrows():
        if _same(r["output_len"], key[1]) and _same(r["input_len"], key[2]):
            return r
    return None


def surface_markdown(surface: pd.DataFrame, be: pd.DataFrame) -> str:
    lines = ["# Speedup surface", "", FORCED_NOTE, "",
             "Speedup S(C, AL) (geometric mean over the surface sweep's points at one concurrency, output and input "
             "length, 95% interval); the acceptance the engine's counters read back next to the forced length. "
             "The curve is the time model 1/S = p + q/AL fitted per concurrency and output length on the points "
             "that read back ok (docs/metrics.md, \"Speedup surface\"). `tail`: what the point's own window tail "
             "cost it (its requests' acceptance spreads even when forced; the window's speedup over one whose "
             "requests all took their mean time): a prediction from this surface divides it out, so it adds only "
             "the predicted head's tail.", ""]
    for v in sorted(surface["variant"].unique()):
        s = surface[surface["variant"] == v]
        lines += [f"## {v}", "", f"![surface](surface-{v}.png)", "",
                  "| C | lengths | forced AL | read back | speedup | 95% interval | tail |",
                  "| ---: | --- | ---: | ---: | ---: | --- | ---: |"]
        for _, r in s.iterrows():
            flag = "" if r["readback"] == "ok" else f" ({r['readback']}, dropped)"
            rates = r["forced_profile"] if isinstance(r["forced_profile"], str) else ""
            profile = f" (profile {rates})" if rates else ""
            lines.append(f"| {int(r['concurrency'])} | {group_text(r)} | {r['forced_acceptance']:g}{profile} | "
                         f"{_f(r['measured_acceptance'])}{flag} "
                         f"| {_f(r['speedup'], 3)} | {_interval(r['speedup_ci_low'], r['speedup_ci_high'], 3)} "
                         f"| {_f(r.get('tail_factor', math.nan), 3)} |")
        lines += ["", "Break-even acceptance from the time model (the AL at which the speedup reaches 1.0; `beyond "
                  "k+1`: no acceptance a step can reach pays at that C; `at most`: pays at the lowest forced length "
                  "already; model: a* wherever it lies) and the model's held-out check (fitted without the middle "
                  "forced length, its error there; `n/a` with fewer than three forced lengths read back):", "",
                  "| C | lengths | break-even AL | 95% interval | model | points | held-out AL | held-out error |",
                  "| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: |"]
        rows = be[be["variant"] == v]
        for _, r in rows.iterrows():
            value, interval = break_even_text(r)
            lines.append(f"| {int(r['concurrency'])} | {group_text(r)} "
                         f"| {value} | {interval} | "
                         f"{_f(r['break_even_acceptance_extrapolated'])} | {int(r['points'])} | "
                         f"{_f(r['heldout_acceptance'], 2)} | {_pct(r['heldout_error'], False)} |")
        errs = [f"{_label((int(r['concurrency']), float(r['output_len']), float(r['input_len'])))}: "
                f"{_pct(r['heldout_error'], False)}" for _, r in rows.iterrows()
                if math.isfinite(float(r["heldout_error"]))]
        held = ", ".join(errs) if errs else "not checked (fewer than three forced lengths read back ok)"
        lines += ["", f"Held-out error of the time model: {held}.", "", *_profile_checks(surface, v)]
        for _, r in rows.iterrows():
            if isinstance(r["dropped"], str) and r["dropped"]:
                lines.append(f"- dropped at C={int(r['concurrency'])}: {r['dropped']}: the forced length did not "
                             "read back, so the point does not measure it")
        lines.append("")
    bad = surface[surface["readback"] != "ok"]
    if len(bad):
        lines += ["**Warning**: the engine's acceptance did not read back as forced at "
                  + ", ".join(f"{r['variant']} AL {r['forced_acceptance']:g} C={int(r['concurrency'])} "
                              f"({_f(r['measured_acceptance'])})" for _, r in bad.iterrows())
                  + ": those points do not measure the length they name and are left out of the model.", ""]
    return "\n".join(lines)


def _profile_checks(surface: pd.DataFrame, variant: str) -> list[str]:
    """The head's own profile against the time model fitted on the forced lengths, at the length it implies:
    whether the shape of the per-position acceptance (not only its mean) moves the speedup."""
    s = surface[(surface["variant"] == variant) & is_profile(surface) & (surface["readback"] == "ok")]
    curves = group_curves(untail(surface), variant)
    out = []
    for _, r in s.iterrows():
        key = (int(r["concurrency"]), float(r["output_len"]), float(r["input_len"]))
        curve = next((c for k, c in curves.items() if k[0] == key[0] and _same(k[1], key[1])
                      and _same(k[2], key[2])), None)
        model = curve.at(float(r["forced_acceptance"])) if curve is not None and len(curve) else math.nan
        error = float(r["speedup"]) / model - 1 if math.isfinite(model) and model > 0 else math.nan
        tail = float(r.get("tail_factor", math.nan))
        with_tail = (f"; with the point's own tail ({_f(tail, 3)}) {_f(model * tail, 3)} "
                     f"({_pct(float(r['speedup']) / (model * tail) - 1, False)})" if math.isfinite(tail) else "")
        out.append(f"- the head's own profile at {_label(key)}: AL {r['forced_acceptance']:g}, measured "
                   f"{_f(r['speedup'], 3)}, the time model at that AL {_f(model, 3)} ({_pct(error, False)})"
                   f"{with_tail}")
    return [*out, ""] if out else []


def write_surface(run_dir: Path) -> list[Path]:
    """From a finished surface run's cells.csv: surface.csv, break_even_al.csv, a plot per variant, surface.md."""
    from specbench.report.derived import normalize_cells

    rd = RunDir(run_dir)
    cells = normalize_cells(pd.read_csv(rd.cells))
    acceptance = pd.read_csv(rd.acceptance) if rd.acceptance.exists() else None
    surface = surface_table(cells, *_forcing(rd), acceptance=acceptance)
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


def _forcing(rd: RunDir) -> tuple[dict[str, float], dict[str, float | list[float]]]:
    """From a surface run's config: per source variant, k + 1 (the most a step can accept), read from its
    drafter's arguments as the engine reads them (a variant whose k is not known is absent); per derived
    variant, its `forced_acceptance` (a length or a profile)."""
    from specbench.config import load_yaml, parse_config
    from specbench.surface.derive import split_name
    from specbench.surface.operations import variant_k

    if not rd.config.exists():
        return {}, {}
    cfg = parse_config(load_yaml(rd.config.read_text(), str(rd.config)), str(rd.config))
    tops, forced = {}, {}
    for v in cfg.variants:
        if v.forced_acceptance is not None:
            forced[v.name] = v.forced_acceptance
        if (parsed := split_name(v.name)) is not None and (k := variant_k(cfg, v.name)) is not None:
            tops[parsed[0]] = k + 1.0
    return tops, forced


def prediction_markdown(pred: pd.DataFrame, surface_dir: Path) -> str:
    lines = ["# Predicted from the speedup surface", "",
             f"Surface: `{surface_dir}`. `predicted`: the time model's speedup at the acceptance each point measured "
             "at the reference concurrency, the window's tail simulated with its requests' acceptance; its 95% "
             "interval holds the step cost's, the acceptance's and the model's own (held-out) error; `at C`: the "
             "same with the acceptance measured at that concurrency (the difference is the acceptance's drift with "
             "load) (docs/metrics.md, \"Prediction from the model\"). **disagree**: the predicted 95% interval and "
             "the measured one do not overlap.",
             "",
             "| variant | C | AL (ref) | AL at C | predicted | 95% interval | at C | error | measured | 95% interval |",
             "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |"]
    for _, r in pred.iterrows():
        ext = " (extrapolated)" if r["extrapolated"] else ""
        lines.append(f"| {r['variant']} | {int(r['concurrency'])} | {_f(r['acceptance_ref'])} | "
                     f"{_f(r['acceptance_at_c'])} "
                     f"| {_f(r['predicted'], 3)}{ext} | [{_f(r['predicted_low'], 3)}, {_f(r['predicted_high'], 3)}] "
                     f"| {_f(r['predicted_at_c'], 3)} | {_pct(r['error'], r['disagree'])} "
                     f"| {_f(r['measured'], 3)} | [{_f(r['measured_low'], 3)}, {_f(r['measured_high'], 3)}] |")
    lines += ["", "Break-even concurrency (first sweep level with speedup below 1.0):", ""]
    for v, (p, m, levels) in sorted(break_even_levels(pred).items()):
        name = lambda i, levels=levels: f"C={levels[i]}" if i < len(levels) else "beyond the sweep"  # noqa: E731
        lines.append(f"- {v}: predicted {name(p)}, measured {name(m)}"
                     + ("" if abs(p - m) <= 1 else " (**more than one level apart**)"))
    return "\n".join(lines) + "\n"


def _pct(error: float, disagree: bool) -> str:
    if not math.isfinite(error):
        return "n/a"
    return f"{100 * error:+.1f}%" + (" **disagree**" if disagree else "")


def write_prediction(run_dir: Path, surface_dir: Path,
                     mapping: dict[str, str] | None = None) -> tuple[pd.DataFrame, list[Path]]:
    """prediction.csv and prediction.md in a run's directory, from its cells.csv (acceptance.csv and
    decomposition.csv where it has them) and a surface. The prediction ledger of the run's setup widens the
    model's error and records this prediction's errors (stores.prediction_history)."""
    from specbench.config import load_yaml, parse_config
    from specbench.report.derived import normalize_cells
    from specbench.stores.prediction_history import for_run
    from specbench.surface.predict import RunExtras, predict_run
    from specbench.surface.stepcost import read_decomposition
    from specbench.surface.table import load_surface

    rd = RunDir(run_dir)
    cfg = parse_config(load_yaml(rd.config.read_text(), str(rd.config)), str(rd.config))
    acceptance = pd.read_csv(rd.acceptance) if rd.acceptance.exists() else None
    cells, ledger = normalize_cells(pd.read_csv(rd.cells)), for_run(rd, cfg)
    pred = predict_run(cells, cfg.baseline.name, load_surface(surface_dir), mapping,
                       RunExtras(acceptance, read_decomposition(run_dir), ledger))
    ledger.record(pred.rename(columns={"surface_variant": "reference_variant"}), cells, str(surface_dir.resolve()))
    out = [run_dir / PREDICTION_FILE, run_dir / "prediction.md"]
    atomic_write(out[0], pred.to_csv(index=False))
    atomic_write(out[1], prediction_markdown(pred, surface_dir))
    return pred, out
