"""What a Conformer head's search gives: one ``Emission`` per token."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Emission:
    """A token the search emitted at encoder frame ``frame``; ``duration`` frames long (TDT's
    predicted jump; 1 for RNN-T and CTC). ``probability`` is its softmax probability among the tokens."""

    id: int
    frame: int
    duration: int
    probability: float
