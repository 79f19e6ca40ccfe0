"""The head builds' data step made cheaper (issue 40): the teacher-forced pass batches sequences of similar
length and gives them back in order, and the data are kept across builds under a key of what decides them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from specbench.demo_models.eagle3 import datacache
from specbench.demo_models.eagle3.data import length_order, teacher_forced
from specbench.demo_models.eagle3.recipe import Eagle3Recipe, Sequence

torch = pytest.importorskip("torch")


class FakeDecoder(torch.nn.Module):
    """A target stand-in: 4 "decoder layers", each adding its index to a per-token embedding (no mixing
    across tokens, so padding changes nothing); records the width of every batch it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(_Add(i) for i in range(4))
        self.widths: list[int] = []

    def forward(self, input_ids, attention_mask):  # noqa: ANN001, ANN201 (torch's call signature)
        self.widths.append(input_ids.shape[1])
        h = input_ids.unsqueeze(-1).float().expand(-1, -1, 2)
        for layer in self.layers:
            h = layer(h)[0]


class _Add(torch.nn.Module):
    def __init__(self, i: int) -> None:
        super().__init__()
        self.i = i

    def forward(self, h):  # noqa: ANN001, ANN201
        return (h + self.i,)


class FakeTarget:
    def __init__(self) -> None:
        self.model = FakeDecoder()


def test_teacher_forced_batches_by_length_and_keeps_the_order() -> None:
    pairs = [([1], [2]), ([3, 4], [5, 6, 7, 8, 9, 10, 11]), ([12], [13, 14]), ([15, 16, 17], [18, 19, 20, 21, 22])]
    target = FakeTarget()
    recipe = replace(Eagle3Recipe(), forward_batch=2, aux_layers=(1, 2, 3))
    seqs = teacher_forced(target, 0, pairs, recipe, lambda _n: None)
    assert target.model.widths == [9, 3]  # (9, 8) then (3, 2): given order would pad to 9 and 8
    for (prompt, reply), s in zip(pairs, seqs, strict=True):
        ids = prompt + reply
        assert s.input_ids.tolist() == ids and s.prompt_len == len(prompt)
        # layer k's input is the embedding plus 0 + 1 + ... + (k - 1); the last layer's output adds 0..3
        assert s.aux_hidden[:, 0].tolist() == [float(t) for t in ids]
        assert s.last_hidden[:, 0].tolist() == [float(t + 6) for t in ids]


def test_length_order_is_longest_first_and_stable() -> None:
    assert length_order([3, 9, 3, 5]) == [1, 3, 0, 2]


def _files(tmp_path: Path) -> tuple[Path, Path]:
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_text("{}")
    (target / "model.safetensors").write_bytes(b"weights")
    sharegpt = tmp_path / "sharegpt.json"
    sharegpt.write_text("[]")
    return target, sharegpt


def test_data_key_follows_what_decides_the_data(tmp_path: Path) -> None:
    target, sharegpt = _files(tmp_path)
    r = Eagle3Recipe()
    name = datacache.data_name(r, "bfloat16", target, sharegpt)
    assert datacache.data_name(replace(r, epochs=9, learning_rate=1e-4), "bfloat16", target, sharegpt) == name
    assert datacache.data_name(replace(r, train_sequences=90), "bfloat16", target, sharegpt) != name
    assert datacache.data_name(r, "float32", target, sharegpt) != name
    (target / "model.safetensors").write_bytes(b"other weights")
    assert datacache.data_name(r, "bfloat16", target, sharegpt) != name


def test_data_cache_round_trip_and_a_bad_file(tmp_path: Path) -> None:
    seqs = [Sequence(torch.tensor([1, 2, 3]), 1, torch.ones(3, 6, dtype=torch.bfloat16), torch.zeros(3, 2))]
    path = tmp_path / "data" / "headdata-x.pt"
    assert datacache.load(path) is None
    datacache.save(path, seqs, {"source": "sharegpt", "n": [1, 2]})
    (back,), info = datacache.load(path)  # type: ignore[misc]
    assert info == {"source": "sharegpt", "n": [1, 2]} and back.prompt_len == 1
    assert torch.equal(back.input_ids, seqs[0].input_ids) and back.aux_hidden.dtype == torch.bfloat16
    assert torch.equal(back.aux_hidden, seqs[0].aux_hidden) and torch.equal(back.last_hidden, seqs[0].last_hidden)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    path.write_bytes(b"truncated")
    assert datacache.load(path) is None
