"""STANDALONE: a smaller LM with the target's tokenizer drafts autoregressively (SGLang's draft-model mode)."""

from __future__ import annotations

from ._eagle_family import EagleFamily


class Standalone(EagleFamily):
    name = "standalone"
    draft_role = "model"
    algorithm = "STANDALONE"
    path_what = "the draft model folder"


DRAFTER = Standalone()
