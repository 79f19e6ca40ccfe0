"""An update of the stored EPYC run of two EAGLE-3 heads (docs/examples/prediction-heads-cpu-epyc, 3 launches):
CONFIG gives its `eagle3` variant the small head's weights, and the update's run is built from that run's own
measurement of the small head at C=16 (cells.csv and acceptance.csv, the variant renamed `eagle3`), as the one
launch of `specbench update` would have measured it."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "docs" / "examples" / "prediction-heads-cpu-epyc"


def update_config(tmp_path: Path, **params: object) -> Path:
    """CONFIG: the run's config with `eagle3` on the small head's weights (or on `params`), the other head gone."""
    data = yaml.safe_load((RUN / "config.yaml").read_text())
    small = next(v for v in data["variants"] if v["name"] == "eagle3_small")
    head = {**small, "name": "eagle3", "params": {**small["params"], **params}}
    data["variants"] = [v for v in data["variants"] if v.get("baseline")] + [head]
    path = tmp_path / "update.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def update_run(tmp_path: Path, concurrency: int = 16) -> Path:
    """The update's run directory: the baseline and the small head (as `eagle3`) at one level."""
    out = tmp_path / "update-run"
    out.mkdir()
    for name in ("cells.csv", "acceptance.csv"):
        d = pd.read_csv(RUN / name)
        level = f"|c{concurrency}|t0"
        at = d["concurrency"] == concurrency if "concurrency" in d else d["point_id"].str.endswith(level)
        d = d[at & (d["variant"] != "eagle3")].copy()
        d["variant"] = d["variant"].replace({"eagle3_small": "eagle3"})
        d.to_csv(out / name, index=False)
    cfg = yaml.safe_load(update_config(tmp_path).read_text())
    cfg["sweep"].update(concurrency=[concurrency], launches=1)
    (out / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    (out / "run.json").write_text(json.dumps({"run_id": "update", "name": cfg["name"],
                                              "variants": {"autoregressive": {"wall_s": 60.0},
                                                           "eagle3": {"wall_s": 75.0}}}))
    return out
