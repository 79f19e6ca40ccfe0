"""report.html in a real browser: headless Chromium parses it, shows hostile text as text and decodes the plots.

Needs `chromium` (or `chromium-browser`) on PATH: .ci/run installs Debian's package, and under CI (CI=true) a
missing browser fails these tests instead of skipping them; by hand without it they skip (on Debian:
`apt-get install -y chromium`). Three short browser runs on the synthetic run from fixtures_report.py.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from specbench.report import render
from tests.conftest import unavailable
from tests.fixtures_report import EVIL, EVIL_CATEGORY, make_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
WINDOW = (1400, 3000)
# A warm run takes 1-3 s; from a cold page cache (after a long suite, on a slow disk) one took 16 s here
# (AMD EPYC, 2 vCPU, after drop_caches), and CI saw two runs exceed 20 s. A dialog hangs forever, so a
# generous bound still catches it.
TIMEOUT_S = 240


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    """One headless run with a throw-away profile and no network chatter; fails the test on a non-zero exit.

    The browser runs in its own process group, so a timeout kills its renderer and zygote children too.
    """
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory() as profile:
        argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args]
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True) as proc:
            try:
                out, err = proc.communicate(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                # an injected script that runs (alert() opens a dialog) leaves headless Chromium waiting forever
                pytest.fail(f"chromium did not finish in {TIMEOUT_S} s ({' '.join(args)}): "
                            "did a script from the run execute?")
    assert proc.returncode == 0, err[-2000:]
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


class DomParser(HTMLParser):
    """Tags in document order and the text content, as a browser's serialized DOM holds them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(html: str) -> DomParser:
    p = DomParser()
    p.feed(html)
    return p


@pytest.fixture(scope="module", autouse=True)
def chromium_installed() -> None:
    if CHROMIUM is None:
        unavailable("chromium is not installed (Debian: apt-get install -y chromium; .ci/run does)")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = make_run(tmp_path_factory.mktemp("browser") / "r1")
    render(run)
    return run / "report.html"


@pytest.fixture(scope="module")
def dom(report: Path) -> str:
    return chromium("--dump-dom", report.as_uri()).stdout


def test_hostile_text_stays_text(dom: str) -> None:
    p = parse(dom)
    tags = [t for t, _ in p.tags]
    assert "body" in tags and "h1" in tags, dom[:500]
    assert "script" not in tags and "iframe" not in tags
    assert not any(k.startswith("on") for _, attrs in p.tags for k in attrs)  # no event handlers either
    text = "".join(p.text)
    assert EVIL in text  # shown literally, as the user would read it
    assert EVIL_CATEGORY in text
    assert "b" not in tags  # the category's `<b>x</b>` did not become markup


def test_verdict_comes_before_the_plots(dom: str) -> None:
    p = parse(dom)
    headings = [i for i, (t, _) in enumerate(p.tags) if t == "h2"]
    imgs = [i for i, (t, _) in enumerate(p.tags) if t == "img"]
    assert imgs, "no plots in the rendered DOM"
    assert headings, "no sections in the rendered DOM"
    h2_text = re.findall(r"<h2>(.*?)</h2>", dom)
    assert h2_text[0] == "Verdict", h2_text
    assert headings[0] < imgs[0]
    assert dom.index('class="verdict"') < dom.index("<img")
    assert all((attrs.get("src") or "").startswith("data:image/png;base64,") for t, attrs in p.tags if t == "img")
    assert all(attrs.get("alt") for t, attrs in p.tags if t == "img")


def test_plots_decode_in_the_browser(report: Path, tmp_path: Path) -> None:
    """The report carries no script, so a probe page holds copies of its <img> tags and reports their sizes."""
    imgs = re.findall(r"<img [^>]*>", report.read_text())
    assert imgs
    probe = tmp_path / "probe.html"
    probe.write_text(
        "<!DOCTYPE html><html><body>" + "".join(imgs) +
        "<script>window.addEventListener('load', () => { document.body.setAttribute('data-sizes', "
        "[...document.images].map(i => i.complete ? i.naturalWidth + 'x' + i.naturalHeight : 'pending')"
        ".join(' ')); });</script></body></html>")
    out = chromium("--virtual-time-budget=5000", "--dump-dom", probe.as_uri()).stdout
    m = re.search(r'data-sizes="([^"]*)"', out)
    assert m, out[-500:]
    sizes = m.group(1).split()
    assert len(sizes) == len(imgs), sizes
    for s in sizes:
        w, h = (int(x) for x in s.split("x"))
        assert w >= 400 and h >= 200, f"a plot decoded as {s}"


def test_screenshot_is_produced(report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    chromium(f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={shot}", report.as_uri())
    data = shot.read_bytes()
    assert data[:8] == PNG_MAGIC
    width, height = struct.unpack(">II", data[16:24])  # IHDR
    assert (width, height) == WINDOW
    assert len(data) > 100_000  # text, tables and plots: far from a blank page
