"""Issue 51 item 7: SLO units per metric. A bare number is seconds; one above what is usual for its metric
(TPOT 1 s a token, e2e 10 min) is said with its unit, not refused by one 10-second cutoff."""

from __future__ import annotations

from pathlib import Path

from specbench.checks.preflight import preflight_warnings
from specbench.config import parse_config
from specbench.server.launch import make_engine, plan_launches
from tests.conftest import make_model_dir


def _config(tmp_path: Path, slo: dict[str, dict[str, float | str]]):  # type: ignore[no-untyped-def]
    model = make_model_dir(tmp_path / "m")
    cfg = parse_config({"model": {"path": str(model)}, "engine": {"kind": "vllm", "version": "0.32.0"},
                        "variants": [{"name": "ar", "drafter": "autoregressive", "baseline": True}],
                        "sweep": {"output_lens": [16], "load": {"kind": "open", "rates": [1]}}, "slo": slo})
    eng = make_engine(cfg, str(model), "m")
    return cfg, preflight_warnings(cfg, eng, plan_launches(cfg, eng))


def test_a_minute_e2e_is_a_sane_slo(tmp_path: Path) -> None:
    cfg, warnings = _config(tmp_path, {"e2e_s": {"p90": 60}, "ttft_s": {"p90": 2}, "tpot_s": {"p90": 0.05}})
    assert cfg.slo == {"e2e_s": {"p90": 60.0}, "ttft_s": {"p90": 2.0}, "tpot_s": {"p90": 0.05}}
    assert warnings == []


def test_a_tpot_of_seconds_and_an_e2e_of_hours_are_said_with_their_unit(tmp_path: Path) -> None:
    _, warnings = _config(tmp_path, {"tpot_s": {"p90": 8}, "e2e_s": {"p99": 900}})
    assert warnings == [
        "slo.tpot_s.p90: 8 s a token (read in seconds) is above the 1 s usual for tpot; if you meant milliseconds "
        "write 8ms",
        "slo.e2e_s.p99: 900 s (read in seconds) is above the 600 s usual for e2e; if you meant milliseconds write "
        "900ms"]
