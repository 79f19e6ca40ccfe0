"""The array forms the columnar analysis uses give the very numbers of the list forms they replace."""

from __future__ import annotations

import numpy as np
import pytest

from specbench.metrics.lossless import compare_outputs, output_digest, same_output
from specbench.metrics.requests import request_itls, request_itls_array


def old_itls(offsets: list[float], tokens: list[int]) -> list[float]:
    """The loop request_itls was before (kept here as the reference)."""
    out: list[float] = []
    prev = None
    for t, n in zip(offsets, tokens):
        k = int(n)
        if k <= 0:
            continue
        if prev is not None:
            out.extend([(float(t) - prev) / k] * k)
        prev = float(t)
    return out


@pytest.mark.parametrize("offsets,tokens", [
    ([0.5, 0.7, 0.9], [1, 0, 2]),  # a chunk without tokens is skipped
    ([0.3, 0.5, 0.9], [0, 1, 2]),  # no tokens in the first chunk
    ([0.1, 0.2, 0.35, 0.4], [2, 3, 1]),  # fewer counts than offsets: zip stops
    ([0.1], [4]), ([], []),
])
def test_itl_array_equals_the_loop(offsets: list[float], tokens: list[int]) -> None:
    assert request_itls_array(offsets, tokens).tolist() == old_itls(offsets, tokens)
    assert request_itls(offsets, tokens) == old_itls(offsets, tokens)
    arr = request_itls_array(np.array(offsets), np.array(tokens, dtype=np.int64))
    assert arr.tolist() == old_itls(offsets, tokens)


def test_itl_array_on_a_long_random_stream_is_bit_identical() -> None:
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 5, 3000).tolist()
    offsets = np.cumsum(rng.random(3000)).tolist()
    assert request_itls_array(offsets, tokens).tolist() == old_itls(offsets, tokens)


@pytest.mark.parametrize("a,b", [
    (([1, 2, 3], "x"), ([1, 2, 3], "y")),  # ids decide when both have them
    (([1, 2, 3], "x"), ([1, 2], "x")),
    ((None, "same"), ([1], "same")),  # else text
    ((None, "a\ud800b"), (None, "a\ud800b")),  # a lone surrogate in the text
    ((None, "abc"), (None, "abd")),
    ((None, None), ([1], "t")),  # nothing to compare
    (([], ""), ([], "")),
])
def test_digest_equality_is_compare_outputs_exact_match(a, b) -> None:
    res = compare_outputs(a[0], a[1], b[0], b[1])
    assert same_output(output_digest(*a), output_digest(*b)) == (res is not None and res[0])


def test_compare_outputs_on_arrays_gives_the_prefix_fraction() -> None:
    assert compare_outputs(np.array([1, 2, 3, 4]), None, np.array([1, 2, 9, 4]), None) == (False, 0.5)
    assert compare_outputs([1, 2], None, [1, 2, 3, 4], None) == (False, 0.5)
    assert compare_outputs([], None, [], None) == (True, 1.0)
