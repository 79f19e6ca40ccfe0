"""The common OpenAI stream chunk decoded straight into a ChunkInfo, reading only the fields a record needs.

`Engine.parse_chunk` takes a dict: every chunk is first decoded whole (id, model, created, logprobs, ...) and
then read with a dozen dict look-ups. Here msgspec decodes the chunk into small Structs that hold only those
fields, and skips the rest without building it (about 3x cheaper per chunk; docs/client-overhead.md).

The result is exactly `Engine.parse_chunk`'s, or None, and then the caller takes the dict path. None is returned
for every chunk this decoder is not sure about: not JSON msgspec accepts (e.g. a lone surrogate escape), a field
of another type than the plain case (a float token id, a string usage, ...), an `error` key, or any top-level key
the engine's `parse_spec` reads (`spec_keys`: with none of them present, the chunk carries no SpecDetails).
`tests/server/test_fastchunk.py` checks the equality on plain, odd and malformed chunks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import msgspec

from specbench.server.engines.base import ChunkInfo, Engine

_UNSET = msgspec.UNSET


class _Delta(msgspec.Struct, gc=False):
    content: str | None = None


class _Choice(msgspec.Struct, gc=False):
    delta: _Delta | None = None
    text: str | None = None
    token_ids: list[int] | None = None
    finish_reason: str | None = None


class _Usage(msgspec.Struct, gc=False):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


FastChunk = Callable[[bytes], "ChunkInfo | None"]


@functools.lru_cache(maxsize=16)
def fast_decoder(spec_keys: tuple[str, ...]) -> FastChunk:
    """A decoder for chunks of an engine whose parse_spec reads only the top-level keys `spec_keys`."""
    # the keys that send a chunk down the dict path: typed UnsetType, no JSON value fits them, so a chunk that
    # has one (even null) fails validation and takes the dict path, at no cost to the chunks without them
    guards = ("error", *spec_keys)
    names = [f"k{i}" for i in range(len(guards))]
    fields: list[tuple[str, object, object]] = [
        ("choices", list[_Choice] | None, None), ("usage", _Usage | None, None),
        *((n, msgspec.UnsetType, _UNSET) for n in names)]
    # gc=False: no reference cycles are possible in these, and untracked instances are cheaper to make
    chunk_type = msgspec.defstruct("Chunk", fields, rename=dict(zip(names, guards)), gc=False)
    decode = msgspec.json.Decoder(chunk_type).decode

    def parse(data: bytes) -> ChunkInfo | None:
        try:
            c = decode(data)
        except msgspec.DecodeError:  # not this shape (ValidationError is a DecodeError): the dict path decides
            return None
        choices, usage = c.choices, c.usage  # type: ignore[attr-defined]
        if choices:
            ch = choices[0]
            d = ch.delta
            text = (d.content or "") if d is not None else (ch.text or "")
            if usage is None:
                return ChunkInfo(text, ch.token_ids, None, None, None, ch.finish_reason)
            return ChunkInfo(text, ch.token_ids, usage.completion_tokens, usage.prompt_tokens, None, ch.finish_reason)
        if usage is None:
            return ChunkInfo("", None, None, None, None, None)
        # the final usage-only chunk
        return ChunkInfo("", None, usage.completion_tokens, usage.prompt_tokens, usage.completion_tokens, None)

    return parse


def chunk_reader(engine: Engine) -> FastChunk | None:
    """The fast decoder for `engine`'s chunks, or None (each chunk is read by engine.parse_chunk). A subclass
    that overrides parse_chunk or parse_spec without its own spec_keys gets None: its reading is unknown."""
    cls = type(engine)
    keys_from = _defined_in(cls, "spec_keys")
    if not all(issubclass(keys_from, _defined_in(cls, m)) for m in ("parse_chunk", "parse_spec")):
        return None
    keys = engine.spec_keys()
    return None if keys is None else fast_decoder(tuple(keys))


def _defined_in(cls: type, name: str) -> type:
    return next(c for c in cls.__mro__ if name in c.__dict__)
