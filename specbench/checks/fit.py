"""A draft's fit to its target (issue 51 item 3), from the two folders' config.json, for every drafter
whose params name a draft folder (checks/node.py `draft_paths`), before a 10-minute load finds out.

A head (`Drafter.draft_role == "head"`: EAGLE, EAGLE-3, MTP, DFlash, DDTree's DFlash draft, Medusa) reads the
target's hidden states and predicts its tokens: its hidden size must be the target's, and its vocabulary
too. A draft model ("model") runs on its own: only the vocabulary (the tokenizer) must be shared. A
vocabulary is compared with 1% slack: checkpoints of one tokenizer pad their embedding tables differently
(Qwen2.5-0.5B has 151936 rows, Qwen2.5-7B 152064), while another tokenizer differs by far more (Llama-3.1's
128256). A head converted to the speculators format names the architecture it was trained for
(`speculators_config.verifier.architectures`): it must be among the target's. A multimodal target's text
model is read from its `text_config` (Kimi K2.6: hidden 7168, vocabulary 163840). Anything not readable
here is not checked (validate says so through the host lines: the folders missing).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specbench.checks.node import draft_paths

if TYPE_CHECKING:
    from specbench.server.launch import VariantLaunch

VOCAB_SLACK = 0.01


def read_model_config(folder: str | Path) -> dict[str, Any] | None:
    """A model folder's config.json as a dict; None when it cannot be read here."""
    try:
        data = json.loads((Path(folder).expanduser() / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _text(cfg: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The section holding the language model's sizes, and its name for messages."""
    text = cfg.get("text_config")
    if "hidden_size" not in cfg and isinstance(text, dict):
        return text, "text_config."
    return cfg, ""


def _size(cfg: dict[str, Any], key: str) -> tuple[int, str] | None:
    section, prefix = _text(cfg)
    value = section.get(key)
    return (value, prefix + key) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _architectures(cfg: dict[str, Any]) -> set[str]:
    out = set(cfg.get("architectures") or [])
    text = cfg.get("text_config")
    return out | set(text.get("architectures") or []) if isinstance(text, dict) else out


def _trained_for(cfg: dict[str, Any]) -> set[str]:
    verifier = (cfg.get("speculators_config") or {}).get("verifier") or {}
    return set(verifier.get("architectures") or []) if isinstance(verifier, dict) else set()


def draft_fit(role: str, draft: dict[str, Any], target: dict[str, Any]) -> list[str]:
    """What does not fit, one phrase each ("hidden size 4096 (hidden_size), the target's 7168 (...)")."""
    out = []
    for key, what in (("hidden_size", "hidden size"), ("vocab_size", "vocabulary")):
        if key == "hidden_size" and role != "head":
            continue
        d, t = _size(draft, key), _size(target, key)
        if d is None or t is None:
            continue
        slack = VOCAB_SLACK * max(d[0], t[0]) if key == "vocab_size" else 0
        if abs(d[0] - t[0]) > slack:
            out.append(f"{what} {d[0]} ({d[1]}) where the target's is {t[0]} ({t[1]})")
    trained, archs = _trained_for(draft), _architectures(target)
    if trained and archs and not trained & archs:
        out.append(f"trained for {', '.join(sorted(trained))} (speculators_config.verifier) where the target is "
                   f"{', '.join(sorted(archs))}")
    return out


def fit_problems(launches: list[VariantLaunch], model_path: str) -> list[str]:
    """One line per draft folder that does not fit the target, naming the field and what to do."""
    from specbench.demo_models import demo_model_path

    target = read_model_config(model_path)
    if target is None:
        return []
    out = []
    for i, la in enumerate(launches):
        role = la.drafter.draft_role
        for field, path in draft_paths(la):
            folder = str(demo_model_path(path) or path)
            if Path(folder).expanduser().resolve() == Path(model_path).expanduser().resolve():
                continue  # the target's own MTP layers
            draft = read_model_config(folder)
            if draft is None:
                continue
            bad = draft_fit(role, draft, target)
            if bad:
                fix = ("a head reads the target's hidden states and predicts its tokens: use one trained for this "
                       "target" if role == "head" else "a draft model must share the target's tokenizer: use one "
                       "of the target's family")
                out.append(f"variants[{i}].params.{field}: the draft at {path} does not fit the target "
                           f"{model_path}: {'; '.join(bad)} (config.json); {fix}")
    return out
