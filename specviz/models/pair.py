"""A loaded draft / target pair: the two LMs, their tokenizer, what was loaded (`info`, the trace's model
description) and, where there is one, a feature drafter over the target. `models.loading` builds one."""

from __future__ import annotations

from dataclasses import dataclass, field

from specviz import kernels
from specviz.kernels import rowkernel
from specviz.models.lm import LM


@dataclass
class Pair:
    target: LM
    draft: LM
    tokenizer: object
    info: dict = field(default_factory=dict)
    eagle: LM | None = None  # a feature drafter over this target (eagle.EagleLM), if any

    def drafter_lm(self, choice: str = "auto") -> LM:
        """The LM that drafts for RunConfig.drafter `choice` ("auto": EAGLE where there is one)."""
        if choice == "eagle" and self.eagle is None:
            raise ValueError("this pair has no EAGLE drafter: load one (--eagle FOLDER) or choose the standalone draft")
        return self.eagle if choice == "eagle" or (choice == "auto" and self.eagle is not None) else self.draft

    def drafter_name(self, lm: LM) -> str:
        """The name `info` gives the drafter `lm` (keys per-drafter measurements such as Sequoia's vector)."""
        return (
            self.info.get("eagle", "eagle") if lm is self.eagle and lm is not None else self.info.get("draft", "draft")
        )

    def describe(self) -> dict:
        """What a trace records of the pair: what was loaded (`info`), the target's vocabulary and whether its
        one-token steps run the row kernel."""
        return {
            **self.info,
            "vocab_size": self.target.vocab_size,
            "row_kernel": rowkernel.enabled() and kernels.wanted(self.target.model),
        }

    @property
    def lms(self) -> list[LM]:
        return [self.target, self.draft] + ([self.eagle] if self.eagle is not None else [])

    @property
    def eos_ids(self) -> set[int]:
        eos = self.target.model.generation_config.eos_token_id
        if eos is None and self.tokenizer is not None:
            eos = self.tokenizer.eos_token_id
        return set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
