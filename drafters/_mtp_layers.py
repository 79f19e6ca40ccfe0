"""How many MTP (NextN) layers a checkpoint's config.json records, read where the engines read it.

vLLM 0.32 (`SpeculativeConfig.hf_config_override`, vllm/config/speculative.py) reads the count as
`num_nextn_predict_layers` (DeepSeek-V3/Kimi K2, GLM-4 MoE, MiMo, Qwen3-Next, ...; under `text_config` for
Kimi K3), `mtp_num_hidden_layers` (Qwen3.5, Qwen4-Exp; top level or under `text_config`), `num_mtp_modules`
(MiniMax M3, under `text_config`) and `mtp_config.num_nextn_predict_layers` (Inkling). A multimodal wrapper
(Kimi K2.5/K2.6's KimiK25ForConditionalGeneration) keeps its text model's keys under `text_config`.
"""

from __future__ import annotations

from typing import Any

MTP_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules")
SECTIONS = ("", "text_config", "mtp_config")  # "" = the top level of config.json


def mtp_layers(hf: dict[str, Any]) -> tuple[int, str] | None:
    """(the MTP layer count, the key it was read from, e.g. `text_config.mtp_num_hidden_layers`), the first
    positive count found; a zero count when only zeros are recorded; None when no key is there at all."""
    found: list[tuple[int, str]] = []
    for section in SECTIONS:
        part = hf.get(section) if section else hf
        if not isinstance(part, dict):
            continue
        for key in MTP_KEYS:
            value = part.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                found.append((value, f"{section}.{key}" if section else key))
    return next((f for f in found if f[0] > 0), found[0] if found else None)


def describe_keys() -> str:
    """The keys looked for, for a message."""
    return ", ".join(MTP_KEYS) + " at the top level or under text_config or mtp_config"
