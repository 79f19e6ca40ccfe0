"""report.md / report.html from a synthetic run directory (no engine; plots rendered once)."""

from __future__ import annotations

import base64
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from specbench.report import (
    Code,
    Document,
    Paragraph,
    Strong,
    Table,
    curve_outcome,
    fmt_interval,
    level_call,
    load_report_data,
    render,
)
from specbench.report import html as html_renderer
from specbench.report import markdown as md_renderer
from tests.fixtures_report import EVIL, EVIL_CATEGORY, make_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    run = make_run(tmp_path_factory.mktemp("run") / "r1")
    paths = render(run)
    assert [p.name for p in paths] == ["report.md", "report.html"]
    assert all(p.exists() and p.stat().st_size for p in paths)
    return {p.suffix: p.read_text() for p in paths}


def test_verdict_comes_before_the_plots(rendered: dict[str, str]) -> None:
    md, html = rendered[".md"], rendered[".html"]
    assert md.index("## Verdict") < md.index("## Plots") < md.index("## Speedup by concurrency")
    assert html.index("<h2>Verdict</h2>") < html.index("<img")


def test_verdict_per_drafter(rendered: dict[str, str]) -> None:
    verdict = rendered[".md"].split("## Verdict")[1].split("## Plots")[0]
    # the fixture's intervals are +-0.05: at C=4 the low end clears 1.0 but not verdict.min_speedup 1.05
    assert "adopt **ngram** for concurrency ≤ 2 on code (interval above 1.05 at 4 of 10 levels); " \
           "baseline wins above" in verdict
    assert "inconclusive on qa" in verdict and "all 10 levels undecided" in verdict
    assert "**draft\\_model**" not in verdict and "**draft_model** never pays" in verdict
    assert "below 1.0 at all 20 measured points" in verdict
    assert "**eagle3** failed" in verdict


def test_plots_are_embedded_and_self_contained(rendered: dict[str, str]) -> None:
    html = rendered[".html"]
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(images) == 4
    assert all(base64.b64decode(b).startswith(PNG_MAGIC) for b in images)
    assert not re.search(r'(src|href)="(https?:|//)', html)  # no external assets
    assert "<link" not in html


def test_no_raw_script_from_data(rendered: dict[str, str]) -> None:
    html, md = rendered[".html"], rendered[".md"]
    assert "<script" not in html.lower()  # the report needs no JS, so any <script> would be injected
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>x</b>" not in html and "qa|&lt;b&gt;x&lt;/b&gt;" in html
    assert EVIL not in md and "\\<script\\>alert(1)\\</script\\>" in md


def test_markdown_tables_escape_pipes(rendered: dict[str, str]) -> None:
    for block in re.split(r"\n\n", rendered[".md"]):
        rows = [r for r in block.splitlines() if r.startswith("| ")]
        if rows:
            widths = {len(re.findall(r"(?<!\\)\|", r)) for r in rows}
            assert len(widths) == 1, block[:200]
    assert "qa\\|\\<b\\>x\\</b\\>" in rendered[".md"]


def test_sections_status_lossless_environment(rendered: dict[str, str]) -> None:
    md = rendered[".md"]
    order = ["## Verdict", "## Plots", "## Speedup by concurrency", "## Break-even concurrency",
             "## Acceptance length by category", "## All cells", "## Fairness audit", "## Losslessness",
             "## Warnings", "## Variants", "## Environment"]
    assert [md.index(h) for h in order] == sorted(md.index(h) for h in order)
    assert "1.60 [1.55, 1.65]" in md
    assert "reused from run runs/r0" in md
    assert "engine exited: \\<script\\>" in md
    assert "divergence at concurrency 1:** `draft_model code|in-|out64|c1|t0`" in md
    assert "numerics, not the drafter" in md
    assert "vllm 0.0.0-test" in md and "—" in md  # NaN shows as a dash


def test_renders_without_optional_files_and_columns(tmp_path: Path) -> None:
    run = make_run(tmp_path / "r", with_break_even=False)
    (run / "fairness.json").unlink()
    (run / "environment.json").unlink()
    cells = pd.read_csv(run / "cells.csv").drop(columns=["acceptance_per_position", "speedup_ci_low",
                                                         "lossless_match_rate", "point_id", "warnings"])
    cells["extra_column"] = 1
    cells.to_csv(run / "cells.csv", index=False)
    md = render(run, plots=False)[0].read_text()
    assert "fairness.json is missing" in md
    # no intervals: point estimates decide, worded as observations
    assert "**ngram** looks faster" in md and "indicative only" in md and "adopt **" not in md


def test_empty_run(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text('{"run_id": "x", "baseline": "base", "variants": {}}')
    md, html = (p.read_text() for p in render(tmp_path))
    assert "nothing to decide" in md and "No plots" in md
    assert html.startswith("<!DOCTYPE html>")


def test_level_and_curve_rules() -> None:
    assert level_call(1.2, 1.06, 1.3) == "win"
    assert level_call(1.2, 1.02, 1.3) == "unclear"  # faster, but not by verdict.min_speedup (1.05)
    assert level_call(1.2, 1.02, 1.3, min_speedup=1.0) == "win"
    assert level_call(1.03, math.nan, math.nan) == "unclear"  # a point estimate must clear it too
    assert level_call(1.2, 0.95, 1.3) == "unclear"
    assert level_call(0.8, 0.7, 0.9) == "lose"
    assert level_call(1.2, math.nan, math.nan) == "win"
    assert level_call(math.nan, math.nan, math.nan) == "unclear"
    curve = pd.DataFrame({"concurrency": [1, 2, 4], "speedup": [1.3, 1.1, 0.8],
                          "speedup_ci_low": [1.2, 0.95, 0.7], "speedup_ci_high": [1.4, 1.2, 0.9]})
    o = curve_outcome(curve)
    assert (o.kind, o.limit, o.beaten_above) == ("adopt_upto", 1, True)
    # the levels decide "never" (every interval below 1.0), not a status they do not support
    assert curve_outcome(curve, "never_pays").kind == "adopt_upto"
    below = curve.assign(speedup=[0.8] * 3, speedup_ci_low=[0.7] * 3, speedup_ci_high=[0.9] * 3)
    assert curve_outcome(below).kind == "never"
    assert curve_outcome(curve, "pays_up_to", 1.5).limit == 1
    # "never" needs break_even's never_pays (every level below 1.0), not a loss at some level
    assert curve_outcome(curve, "inconclusive").kind == "adopt_upto"
    rising = curve.assign(speedup=[0.8, 1.0, 1.3], speedup_ci_low=[0.7, 0.9, 1.2], speedup_ci_high=[0.9, 1.1, 1.4])
    o = curve_outcome(rising)
    assert (o.kind, o.wins, o.losses) == ("mixed", (4,), (1,))


def test_renderers_escape_inline_markup() -> None:
    doc = Document("t <i>", [Paragraph(["a*b* <x>", Strong("s|t"), Code("c`d")]),
                             Table(["h|1"], [["<td>|"]])])
    md = md_renderer.render(doc)
    assert "a\\*b\\* \\<x\\>" in md and "``c`d``" in md and "| h\\|1 |" in md and "\\<td\\>\\|" in md
    h = html_renderer.render(doc)
    assert "<i>" not in h and "&lt;td&gt;|" in h and "<strong>s|t</strong>" in h


def test_load_report_data_types(tmp_path: Path) -> None:
    data = load_report_data(make_run(tmp_path / "r"))
    assert data.baseline == "autoregressive"
    assert data.drafters == ["ngram", "draft_model", "eagle3"]
    assert data.cells["valid"].dtype == bool
    assert math.isnan(data.cells["input_len"].iloc[0])
    assert EVIL_CATEGORY in set(data.cells["category"])
    assert fmt_interval(1.0, math.nan, 2.0) == "1.00"


class _Tags(HTMLParser):
    VOID = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.seen: set[str] = set()
        self.handlers: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.add(tag)
        self.handlers += [k for k, _ in attrs if k.startswith("on")]
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-5:])
        self.stack.pop()


def test_html_is_well_formed_and_inert(rendered: dict[str, str]) -> None:
    p = _Tags()
    p.feed(rendered[".html"])
    p.close()
    assert p.stack == []
    assert not p.seen & {"script", "iframe", "object", "embed", "b", "i"}  # <b>/<i> appear only in data
    assert p.handlers == []
    assert {"table", "figure", "img", "details", "ul"} <= p.seen


def test_verdict_without_launch_variance_gives_no_advice(tmp_path: Path) -> None:
    """One launch per variant and no calibration: the same intervals, but the verdict only observes."""
    run = make_run(tmp_path / "r")
    cells = pd.read_csv(run / "cells.csv").assign(interval_unit="repeat", launches=1, launch_cv=math.nan)
    cells.to_csv(run / "cells.csv", index=False)
    verdict = render(run, plots=False)[0].read_text().split("## Verdict")[1].split("*A concurrency")[0]
    assert "adopt **" not in verdict and "baseline wins" not in verdict and "never pays" not in verdict
    assert "**ngram** looks faster for concurrency ≤ 2 on code" in verdict and "baseline looks faster" in verdict
    assert "**draft_model** looks slower" in verdict
    assert "indicative only: 1 launch per variant and no calibration for this hardware" in verdict
    # with a calibration the intervals carry the launch variance, and the verdict says where it came from
    cells.assign(interval_unit="repeat+calibration", launch_cv=0.12).to_csv(run / "cells.csv", index=False)
    verdict = render(run, plots=False)[0].read_text().split("## Verdict")[1].split("*A concurrency")[0]
    assert "adopt **ngram**" in verdict and "between-launch CV 12.0% from this hardware's calibration" in verdict


def test_the_fairness_section_states_prefix_caching(tmp_path: Path) -> None:
    """fairness.json's prefix_caching line (checks/fairness.py) is in the report; older runs have none."""
    import json

    run = make_run(tmp_path / "r")
    f = json.loads((run / "fairness.json").read_text())
    assert "Prefix caching" not in render(run, plots=False)[0].read_text()
    f["prefix_caching"] = "off for every variant (engine.prefix_caching; off unless true)"
    (run / "fairness.json").write_text(json.dumps(f))
    md, html = (p.read_text() for p in render(run, plots=False))
    assert "Prefix caching: off for every variant" in md and "Prefix caching: off for every variant" in html
