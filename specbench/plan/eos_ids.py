"""The model's end-of-sequence token ids, read from its folder: the ids a request with `ignore_eos` generates
past (metrics: `past_eos_share`, docs/metrics.md).

Where they are: generation_config.json's `eos_token_id` (an int or a list: chat models often list the chat
turn's end next to the tokenizer's EOS, e.g. Llama 3's `<|eot_id|>`), config.json's `eos_token_id`, and
tokenizer_config.json's `eos_token` (a string or {"content": ...}) looked up in its `added_tokens_decoder`.
The union of all three: a model stops at any of them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def eos_token_ids(model_dir: str | Path) -> list[int] | None:
    """The sorted EOS ids the model folder names, or None when it names none (or is not a local folder)."""
    folder = Path(model_dir).expanduser()
    if not folder.is_dir():
        return None
    ids: set[int] = set()
    for name in ("generation_config.json", "config.json"):
        ids |= _ids(_read(folder / name).get("eos_token_id"))
    tok = _read(folder / "tokenizer_config.json")
    eos = tok.get("eos_token")
    text = eos.get("content") if isinstance(eos, dict) else eos
    if isinstance(text, str):
        for key, entry in (tok.get("added_tokens_decoder") or {}).items():
            if isinstance(entry, dict) and entry.get("content") == text and str(key).isdigit():
                ids.add(int(key))
    return sorted(ids) or None


def _ids(value: Any) -> set[int]:
    if isinstance(value, bool):
        return set()
    if isinstance(value, int):
        return {value}
    if isinstance(value, list):
        return {v for v in value if isinstance(v, int) and not isinstance(v, bool)}
    return set()


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
