"""Word error rate: word-level Levenshtein distance over a documented, deliberately small normalisation.

Normalisation (``normalize``), applied to reference and hypothesis alike:

* lowercase (Unicode ``str.lower``);
* dashes (Unicode category Pd: ``-``, ``–``, ``—``) become spaces, so "ill-disposed" is two words, as
  references spelled "ill disposed" have it;
* other punctuation (Unicode categories P*: ``. , ; : ! ? ' " ( )`` ...) is deleted, except a ``.`` or
  ``,`` between two digits, so "3.5" and "1,000" stay one number;
* whitespace runs collapse to one space and the text is split on it.

Numbers are kept as written: "10" against a reference's "ten" counts as an error. That is on purpose:
the point is to compare two decoders on the same audio, and both write digits the same way, so an
English number normaliser (as in OpenAI's evaluation) would only hide where they differ.

WER over several utterances is the corpus rate: all edits over all reference words, not the mean of the
per-utterance rates (which would weigh a 2-word command like a 60-word paragraph).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass


def normalize(text: str) -> list[str]:
    """The words of ``text`` after the normalisation in the module docstring."""
    text = text.lower()
    kept = []
    for i, char in enumerate(text):
        category = unicodedata.category(char)
        if category == "Pd":
            kept.append(" ")
        elif category.startswith("P"):
            between_digits = 0 < i < len(text) - 1 and text[i - 1].isdigit() and text[i + 1].isdigit()
            if char in ".," and between_digits:
                kept.append(char)
        else:
            kept.append(char)
    return "".join(kept).split()


def edit_distance(reference: list[str], hypothesis: list[str]) -> int:
    """Fewest word substitutions, deletions and insertions that turn ``reference`` into ``hypothesis``."""
    previous = list(range(len(hypothesis) + 1))  # distances from reference[:0] to each hypothesis prefix
    for i, ref_word in enumerate(reference, start=1):
        current = [i]
        for j, hyp_word in enumerate(hypothesis, start=1):
            current.append(min(
                previous[j] + 1,  # reference word deleted
                current[j - 1] + 1,  # hypothesis word inserted
                previous[j - 1] + (ref_word != hyp_word),  # substituted, or the same word
            ))
        previous = current
    return previous[-1]


@dataclass(frozen=True)
class ErrorCount:
    """Word edits against a reference of ``words`` words; add counts to pool utterances."""

    errors: int = 0
    words: int = 0

    def __add__(self, other: ErrorCount) -> ErrorCount:
        return ErrorCount(self.errors + other.errors, self.words + other.words)

    @property
    def rate(self) -> float:
        """Edits per reference word; an empty reference counts as one word, so insertions still show."""
        return self.errors / max(self.words, 1)


def count_errors(reference: str, hypothesis: str) -> ErrorCount:
    """Edits and reference words of one utterance, both texts normalised."""
    ref = normalize(reference)
    return ErrorCount(edit_distance(ref, normalize(hypothesis)), len(ref))


def wer(references: Iterable[str], hypotheses: Iterable[str]) -> float:
    """Corpus word error rate of ``hypotheses`` against ``references`` (paired in order)."""
    pairs = list(zip(references, hypotheses, strict=True))
    return sum((count_errors(r, h) for r, h in pairs), ErrorCount()).rate
