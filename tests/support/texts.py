"""Transcripts compared word for word, and the reference transcripts of the test audio."""

from __future__ import annotations

import csv

from support.data import AUDIO

STREAM_WER_MARGIN = 0.06
"""The most a dictation of several pieces (``engine.stream``) may add to its offline text's word error rate."""


def one_piece(pcm) -> bool:
    """Whether a dictation of ``pcm`` is too short for a pause to close a piece of it: then its text is the
    offline text of the same audio (``engine.stream``)."""
    from sayso.engine.segmenter import SAMPLE_RATE
    from sayso.engine.stream import MIN_CLOSED_PIECE
    from sayso.engine.vad import CLOSING_PAUSE

    return len(pcm) < (MIN_CLOSED_PIECE + CLOSING_PAUSE) * SAMPLE_RATE


def words(text: str) -> str:
    """The words of ``text``, normalised as word error rates count them (``engine.wer``), in one string:
    transcripts compared word for word, whatever their punctuation and case."""
    from sayso.engine.wer import normalize

    return " ".join(normalize(text))


def reference_words(file: str) -> str:
    """``words`` of ``file``'s reference transcript in ``AUDIO/transcripts.tsv``."""
    with open(AUDIO / "transcripts.tsv", encoding="utf-8") as table:
        return next(words(row["reference"]) for row in csv.DictReader(table, delimiter="\t") if row["file"] == file)


JFK_WORDS = reference_words("jfk.wav")  # what every model here hears in jfk.wav
