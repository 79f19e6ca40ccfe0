"""SGLang's OpenAI-protocol acceptance objects for the stand-in, taken from SGLang's own classes.

Two halves of one job:
- `python tests/standin/sglang_protocol.py [--write]`, run by a python that has sglang (.venv-sglang, see
  scripts/sglang-venv.sh), builds what SGLang's serving_chat / serving_completions send with
  `return_spec_tokens_details`: `ChatCompletionStreamResponse` / `CompletionStreamResponse` with
  `choices=[]` and `sglext=SglExt(spec_tokens_details=SpecTokensDetails())`, serialized as SGLang serializes
  them (`model_dump_json`), and prints it (--write: into sglang_protocol.json beside this file).
- `load()` reads that JSON in the stand-in, which runs under specbench's python (no sglang there), and
  `Protocol` fills its templates, refusing any field SGLang's class does not have.

Why a generated file rather than importing the classes in the stand-in: importing
`sglang.srt.entrypoints.openai.protocol` runs `sglang/__init__`, which imports torch and triton and patches
transformers (about 4 s per start; the suite starts the stand-in dozens of times), and putting the SGLang venv's
site-packages next to specbench's would make which numpy or pydantic gets imported an accident of path order.
The file is never edited by hand: tests/server/test_sglang_protocol.py regenerates it from the pinned SGLang on every
`make test` and fails when it differs, so a field SGLang renames breaks the tests instead of living on here.
"""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROTOCOL_JSON = Path(__file__).with_name("sglang_protocol.json")


class ProtocolError(ValueError):
    """The stand-in used a name that SGLang's protocol classes do not have."""


@dataclass(frozen=True)
class Protocol:
    data: dict[str, Any]

    @property
    def version(self) -> str:
        return str(self.data["sglang"])

    def details(self, fields: dict[str, Any]) -> dict[str, Any]:
        """A `SpecTokensDetails` as SGLang sends it: its defaults overridden by `fields`."""
        template = self.data["spec_tokens_details"]
        unknown = sorted(set(fields) - set(template))
        if unknown:
            raise ProtocolError(f"SGLang {self.version}'s SpecTokensDetails has no field {', '.join(unknown)} "
                                f"(its fields: {', '.join(template)})")
        return {**copy.deepcopy(template), **fields}

    def sglext(self, fields: dict[str, Any]) -> dict[str, Any]:
        """The `sglext` object of a non-streamed response."""
        return _replace(self.data["sglext"], spec_tokens_details=self.details(fields))

    def chunk(self, chat: bool, rid: str, created: int, model: str, fields: dict[str, Any]) -> dict[str, Any]:
        """The final streamed chunk (`choices: []`) that carries `sglext.spec_tokens_details`."""
        out = _replace(self.data["chat_chunk" if chat else "completion_chunk"], id=rid, created=created, model=model)
        out["sglext"] = self.sglext(fields)
        return out


def _replace(template: dict[str, Any], **values: Any) -> dict[str, Any]:
    """A copy of `template` with `values` set; a key the template lacks is SGLang's rename, not ours to add."""
    missing = sorted(set(values) - set(template))
    if missing:
        raise ProtocolError(f"SGLang's object has no field {', '.join(missing)} (its fields: {', '.join(template)})")
    return {**copy.deepcopy(template), **values}


def load(path: Path = PROTOCOL_JSON) -> Protocol:
    return Protocol(json.loads(path.read_text()))


# -- generation (under a python that has sglang) ------------------------------------------------------
def dump() -> dict[str, Any]:
    import importlib.metadata

    from sglang.srt.entrypoints.openai.protocol import (
        ChatCompletionResponse,
        ChatCompletionStreamResponse,
        CompletionResponse,
        CompletionStreamResponse,
        SglExt,
        SpecTokensDetails,
    )

    def wire(obj: Any) -> Any:
        return json.loads(obj.model_dump_json())  # what SGLang writes after `data: `

    for cls in (ChatCompletionResponse, CompletionResponse):  # the stand-in puts sglext on these too
        if "sglext" not in cls.model_fields:
            raise SystemExit(f"{cls.__name__} has no sglext field in this SGLang")
    ext = SglExt(spec_tokens_details=SpecTokensDetails())
    return {"sglang": importlib.metadata.version("sglang"),
            "spec_tokens_details": wire(SpecTokensDetails()),
            "sglext": wire(ext),
            "chat_chunk": wire(ChatCompletionStreamResponse(id="", created=0, model="", choices=[], sglext=ext)),
            "completion_chunk": wire(CompletionStreamResponse(id="", created=0, model="", choices=[], sglext=ext))}


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"


if __name__ == "__main__":
    # run as a script, this folder heads sys.path: keep its modules (server, tokens) from shadowing SGLang's imports
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
    text = render(dump())
    if "--write" in sys.argv[1:]:
        PROTOCOL_JSON.write_text(text)
    else:
        sys.stdout.write(text)
