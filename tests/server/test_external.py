"""An endpoint specbench does not launch (issue 39 item 2): two variants at one URL, more than one launch and
calibrate are refused with the reason, and the report says the server's hardware is unknown unless the
config states it (engine.hardware), never the client's."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from specbench.config import parse_config
from specbench.records.rundir import RunDir
from specbench.report.audits import hardware_section
from specbench.report.summary import context
from specbench.runner.prepare import write_side_files
from specbench.server.launch import make_engine, plan_launches
from specbench.shared.errors import ConfigError, UsageError
from specbench.stores.calibration import calibration_config


def external(**engine: Any) -> dict[str, Any]:
    return {"model": {"path": "/m"}, "engine": {"kind": "external", "url": "http://gpu-box:8000", **engine},
            "variants": [{"name": "ar", "drafter": "autoregressive", "baseline": True},
                         {"name": "e3", "drafter": "eagle3", "params": {"draft_model_path": "/d"},
                          "url": "http://gpu-box:8001"}],
            "sweep": {"output_lens": [16], "concurrency": [1]}}


def variant_url(url: str | None) -> Callable[[dict[str, Any]], None]:
    def apply(c: dict[str, Any]) -> None:
        if url is None:
            c["variants"][1].pop("url")
        else:
            c["variants"][1]["url"] = url
    return apply


def set_in(section: str, **values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda c: c[section].update(values)


# each bad config with its one-line answer
BAD = [
    ("both-on-engine-url", variant_url(None),
     "x.yaml: engine.url: variants ar and e3 are both served by http://gpu-box:8000: the server would be compared "
     "with itself; give each variant its own server's url"),
    ("variant-url-is-engine-url", variant_url("http://gpu-box:8000/"),
     "x.yaml: variants[1].url: variants ar and e3 are both served by http://gpu-box:8000: the server would be "
     "compared with itself; give each variant its own server's url"),
    ("two-launches", set_in("sweep", launches=2),
     "x.yaml: sweep.launches: 2 launches of an external endpoint would measure one server that specbench never "
     "relaunches, and record its repeats as between-launch variance; set launches: 1 (repeats and waves measure "
     "within it)"),
    ("hardware-on-a-launched-engine", lambda c: c["engine"].update(kind="vllm", url=None, hardware="8 x H100"),
     "x.yaml: engine.hardware: describes an external endpoint's server; a launched engine's hardware is read from "
     "the node it runs on (remove it)"),
]


@pytest.mark.parametrize("change,expected", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_external_configs(change: Callable[[dict[str, Any]], None], expected: str) -> None:
    data = copy.deepcopy(external())
    change(data)
    with pytest.raises(ConfigError) as exc:
        parse_config(data, "x.yaml")
    assert str(exc.value) == expected


def test_calibrate_is_refused_for_an_external_endpoint() -> None:
    with pytest.raises(UsageError) as exc:
        calibration_config(parse_config(external()), 3)
    assert str(exc.value) == (
        "calibrate: engine.kind external is an endpoint specbench does not launch: it cannot be relaunched, so "
        "there is no between-launch variance to measure; calibrate with a config that launches the engine (vllm, "
        "sglang or command)")


def _side_files(tmp_path: Path, data: dict[str, Any]) -> dict[str, Any]:
    cfg = parse_config(data)
    engine = make_engine(cfg, "/m", "m")
    plan = SimpleNamespace(cfg=cfg, engine=engine, launches=plan_launches(cfg, engine), eos_token_ids=[])
    write_side_files(RunDir(tmp_path), plan)  # type: ignore[arg-type]
    return json.loads((tmp_path / "environment.json").read_text())


def _report_data(env: dict[str, Any]) -> Any:
    import pandas as pd

    return SimpleNamespace(environment=env, cells=pd.DataFrame(), config={"model": {"path": "/m"}}, meta={},
                           drafters=["e3"], baseline="ar")


def test_the_server_hardware_is_unknown_unless_stated(tmp_path: Path) -> None:
    env = _side_files(tmp_path / "a", external())
    assert env["nodes"] == {} and env["variant_nodes"] == {}  # no node of this host served a variant
    assert env["server_hardware"].startswith("unknown (an endpoint specbench did not launch")
    text = context(_report_data(env)).parts[0]
    assert "served by external (version unknown) on hardware unknown (an endpoint specbench did not launch; " \
           "describe it with engine.hardware), measured from a client (" in text
    stated = _side_files(tmp_path / "b", external(hardware="8 x H200 141GB, TP8"))
    assert stated["server_hardware"] == "8 x H200 141GB, TP8"
    section = hardware_section(_report_data(stated))
    assert "its hardware: 8 x H200 141GB, TP8. The host, CPU and GPUs under Environment are the client's." in \
        section[1].parts[0]
