"""EAGLE (EAGLE-1/2): a draft head fed by the target's last hidden state; chain or tree.

SGLang `--speculative-algorithm EAGLE` (tree: steps, topk, num_draft_tokens). vLLM 0.32
`--speculative-config {"method": "eagle", "model": ..., "num_speculative_tokens": steps}`: a chain only, so
topk and num_draft_tokens (SGLang's tree shape) are refused on vLLM rather than silently dropped (by the
EAGLE family's check, as for EAGLE-3). The recipe
is EAGLE-3's with another algorithm and method name.
"""

from __future__ import annotations

from .eagle3 import Eagle3


class Eagle(Eagle3):
    name = "eagle"
    algorithm = "EAGLE"
    path_what = "the EAGLE draft head folder"
    vllm_method = "eagle"


DRAFTER = Eagle()
