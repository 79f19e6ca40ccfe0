"""The fast chunk decoder (engines/fastchunk.py) gives exactly Engine.parse_chunk's ChunkInfo, or None (then the
dict path reads the chunk): on plain, odd and malformed chunks, for each engine's spec keys."""

from __future__ import annotations

import json
from typing import Any

import pytest

from specbench.config import parse_config
from specbench.server.engines.base import ChunkInfo
from specbench.server.engines.command import CommandEngine
from specbench.server.engines.fastchunk import chunk_reader
from specbench.server.engines.sglang import SGLangEngine
from specbench.server.engines.vllm import VLLMEngine
from specbench.server.launch import sweep_facts


def _cfg(kind: str, **engine: Any) -> Any:
    return parse_config({"model": {"path": "/m", "served_name": "m"},
                         "engine": {"kind": kind, "command": ["srv", "{port}"], **engine} if kind == "command"
                         else {"kind": kind, **engine},
                         "variants": [{"name": "a", "drafter": "autoregressive", "baseline": True}],
                         "sweep": {"output_lens": [8], "concurrency": [1]}})


def engines() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, cls, kind, extra in (("vllm", VLLMEngine, "vllm", {}), ("sglang", SGLangEngine, "sglang", {}),
                                   ("command", CommandEngine, "command", {"acceptance_field": "stats.al"})):
        c = _cfg(kind, **extra)
        out[name] = cls(c.engine, sweep_facts(c), "/m", "m")
    return out


TOKEN = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}, "logprobs": None,
                      "finish_reason": None, "token_ids": [5, 6]}],
         "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}
PLAIN = [  # the fast path must read these (the common chunks of vLLM, SGLang and OpenAI servers)
    TOKEN,
    {"choices": [{"index": 0, "text": "ab", "finish_reason": "length"}]},  # /v1/completions
    {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 9}},  # the final usage chunk
    {"choices": [{"delta": {"content": None}, "finish_reason": "stop"}], "usage": None},
    {"choices": [{"delta": None, "text": "t"}]},
    {"choices": None},
    {},
    {"choices": [{"delta": {"content": "a\u00e9\U0001f600"}}], "usage": {"completion_tokens": 1}},
    {"choices": [{"delta": {"content": "x"}}], "usage": {"completion_tokens": 1}, "choices ": 1},
]
ODD = [  # each must give parse_chunk's result, by either path
    {"choices": [{"delta": {"content": "x"}, "token_ids": [1.0]}]},
    {"choices": [{"delta": {"content": "x"}, "token_ids": [True]}]},
    {"choices": [{"delta": {"content": "x"}, "token_ids": "12"}]},
    {"choices": [{"delta": {"content": 5}}]},
    {"choices": [{"delta": "text", "text": "y"}]},
    {"choices": [{"delta": {"content": "x"}, "finish_reason": 3}]},
    {"choices": [{"delta": {"content": "x"}}, "second"]},
    {"choices": {"0": 1}},
    {"usage": "many"},
    {"usage": {"completion_tokens": "2", "prompt_tokens": 1.5}},
    {"usage": {"completion_tokens": True}},
    {"usage": {"completion_tokens": 12345678901234567890123}},
    {"choices": [{"delta": {"content": "x"}}], "metrics": {"speculative_decoding": {"num_accepted_draft_tokens": 1}},
     "usage": {"completion_tokens": 4}},
    {"choices": [{"delta": {"content": "x"}}], "metrics": None},
    {"choices": [{"delta": {"content": "x"}}], "sglext": {"spec_tokens_details": {"spec_verify_ct": 2}}},
    {"meta_info": {"spec_verify_ct": 2, "completion_tokens": 4}},
    {"choices": [], "stats": {"al": 2.5}, "usage": {"completion_tokens": 10}},
    {"choices": [{"delta": {"content": "x"}}], "error": None},
]
RAW = [  # bytes the decoder must leave to the dict path (or read exactly as it would)
    b'{"choices": [{"delta": {"content": "x\\ud83d"}}]}',  # a lone surrogate: msgspec refuses it
    b'{"metr\\u0069cs": {"speculative_decoding": {"num_draft_tokens": 2}}, "choices": []}',  # an escaped key
    b'{"choices": [{"delta": {"content": "a"}}], "choices": []}',  # a duplicate key: the last one counts
    b'{"usage": {"completion_tokens": 1}, "usage": {"completion_tokens": 2}}',
    b'[1, 2]', b'"text"', b'{not json', b'',
]


def reference(engine: Any, data: bytes) -> ChunkInfo | None:
    try:
        chunk = json.loads(data)
    except ValueError:
        return None
    if not isinstance(chunk, dict) or ("error" in chunk and not chunk.get("choices")):
        return None
    try:
        return engine.parse_chunk(chunk)
    except AttributeError:  # the dict path's "unreadable chunk"
        return None


@pytest.mark.parametrize("name", ["vllm", "sglang", "command"])
def test_fast_decoder_reads_chunks_exactly_as_parse_chunk(name):
    engine = engines()[name]
    fast = chunk_reader(engine)
    assert fast is not None
    corpus = [json.dumps(c).encode() for c in (*PLAIN, *ODD)] + RAW
    for data in corpus:
        got = fast(data)
        if got is not None:
            assert got == reference(engine, data), data
    for c in PLAIN:  # the plain chunks take the fast path (else this test would compare nothing)
        assert fast(json.dumps(c).encode()) is not None, c
    for c in ODD[-6:]:  # spec keys and errors always go to the dict path
        key = next(k for k in c if k not in ("choices", "usage"))
        if key == "error" or key in (engine.spec_keys() or ()):
            assert fast(json.dumps(c).encode()) is None, c


def test_an_engine_whose_reading_is_unknown_gets_no_fast_decoder():
    class Custom(VLLMEngine):
        def parse_spec(self, data: dict[str, Any]) -> Any:
            return None

    c = _cfg("vllm")
    assert chunk_reader(Custom(c.engine, sweep_facts(c), "/m", "m")) is None
    c2 = _cfg("command", acceptance_field="usage.accept_length")  # a field every token chunk has
    assert chunk_reader(CommandEngine(c2.engine, sweep_facts(c2), "/m", "m")) is None
