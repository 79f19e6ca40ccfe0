"""specbench and the stand-in against SGLang's own OpenAI protocol classes (the pinned SGLang in .venv-sglang).

- the stand-in's sglang_protocol.json is exactly what the pinned SGLang's classes produce;
- engines/sglang.py reads a chunk built and serialized by SGLang's own code (`spec_tokens_details_from_meta_info`,
  `SglExt`, `ChatCompletionStreamResponse`) into the right numbers: a field renamed on either side fails here;
- the stand-in refuses to start when a name it sends is not in SGLang's SpecTokensDetails.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from specbench.server.engines.sglang import _NEW, parse_sglang_spec
from specbench.shared.schema import SpecDetails
from tests.standin.server import Options, StandIn
from tests.standin.sglang_protocol import PROTOCOL_JSON, Protocol, ProtocolError, load

REPO = Path(__file__).resolve().parents[2]
GENERATOR = REPO / "tests" / "standin" / "sglang_protocol.py"

# One request as SGLang's TokenizerManager puts it in meta_info, under the names specbench reads:
# 10 verify steps, 30 drafts proposed (3 a step), 17 accepted, 27 tokens out (17 + one bonus a step).
META = {"spec_verify_ct": 10, "spec_num_correct_drafts": 17, "spec_num_proposed_drafts": 30,
        "spec_correct_drafts_histogram": [2, 3, 5], "spec_accept_length": 2.7, "spec_accept_rate": 17 / 30}
EXPECTED = SpecDetails(verify_steps=10, accepted_drafts=17, proposed_drafts=30, accept_histogram=[2, 3, 5],
                       reported_accept_length=2.7, source="sglang")


def figures(spec: SpecDetails | None) -> dict | None:
    """The parsed figures, without the verbatim payload (`raw`) they came from."""
    return spec.model_dump(exclude={"raw"}) if spec is not None else None

# Runs in the SGLang venv: the final chunk of a streamed chat, built the way serving_chat builds it.
REAL_CHUNK = r"""
import json, sys
from sglang.srt.entrypoints.openai.protocol import ChatCompletionStreamResponse, SglExt
from sglang.srt.entrypoints.openai.utils import spec_tokens_details_from_meta_info
details = spec_tokens_details_from_meta_info(json.loads(sys.argv[1]))
chunk = ChatCompletionStreamResponse(id="r1", created=0, choices=[], model="m",
                                     sglext=SglExt(spec_tokens_details=details))
print(json.dumps({"chunk": chunk.model_dump_json(), "fields": list(type(details).model_fields)}))
"""


def _run(sglang_python: str, *args: str) -> str:
    r = subprocess.run([sglang_python, *args], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def test_protocol_file_is_what_pinned_sglang_generates(sglang_python: str) -> None:
    fresh = _run(sglang_python, str(GENERATOR))
    assert fresh == PROTOCOL_JSON.read_text(), (
        f"{PROTOCOL_JSON.name} differs from what SGLang's classes in {sglang_python} produce: regenerate it with "
        f"`{sglang_python} {GENERATOR.relative_to(REPO)} --write` and check specbench/server/engines/sglang.py's names")


def test_specbench_reads_a_chunk_sglang_serialized(sglang_python: str) -> None:
    out = json.loads(_run(sglang_python, "-c", REAL_CHUNK, json.dumps(META)))
    fields = set(out["fields"])
    read = set(_NEW.values()) | {"spec_verify_ct", "spec_accept_length"}
    assert read <= fields, f"engines/sglang.py reads {sorted(read - fields)}, which SpecTokensDetails lacks"
    assert figures(parse_sglang_spec(json.loads(out["chunk"]))) == figures(EXPECTED)


def test_standin_sends_sglangs_shape() -> None:
    """The stand-in's sglext chunk: SGLang's template with the request's numbers (no key added or lost)."""
    proto = load()
    chunk = proto.chunk(True, "r1", 5, "m", META)
    template = proto.data["chat_chunk"]
    assert set(chunk) == set(template) and chunk["choices"] == [] and chunk["usage"] is None
    assert set(chunk["sglext"]["spec_tokens_details"]) == set(proto.data["spec_tokens_details"])
    assert figures(parse_sglang_spec(chunk)) == figures(EXPECTED)


def test_standin_refuses_a_field_sglang_renamed() -> None:
    data = json.loads(PROTOCOL_JSON.read_text())
    details = data["spec_tokens_details"]
    details["spec_num_accepted_drafts"] = details.pop("spec_num_correct_drafts")  # a rename in SGLang
    with pytest.raises(ProtocolError, match="has no field spec_num_correct_drafts"):
        StandIn(Options(port=0, format="sglang"), protocol=Protocol(data))
    StandIn(Options(port=0, format="sglang"), protocol=load())  # the pinned one starts
