"""Salute's GigaAM v3 (Russian; CTC or RNN-T heads, character or SentencePiece vocabularies) from
transcribe.cpp's GGUF layout (``general.architecture = "gigaam"``).

``load(model_file, ops)`` returns the transcriber the engine drives: one piece of audio (up to
``window_seconds``) in, one segment with token timestamps (40 ms encoder frames) out.
"""

from __future__ import annotations

import numpy as np

from sayso.engine.conformer.text import Vocabulary, segment
from sayso.engine.options import check_options
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.gigaam.config import GigaamConfig
from sayso.engine.gigaam.frontend import Frontend
from sayso.engine.gigaam.model import GigaamModel
from sayso.engine.ops import Ops
from sayso.engine.transcript import Segment


class GigaamTranscriber:
    """GigaAM on a backend: ``transcribe(pcm, offset, language, task, prompt) -> (segments, language)``."""

    window_seconds = 25.0
    """GigaAM is trained on utterances up to 25 s (its own package refuses longer ones)."""
    stream_hooks = frozenset()  # it keeps no frames between calls and is not interrupted

    def __init__(self, model_file: ModelFile, ops: Ops):
        self.config = GigaamConfig.from_model_file(model_file)
        self.name = self.config.name
        self.languages, self.can_translate = self.config.languages, False
        self.vocabulary = Vocabulary.from_model_file(model_file)
        self.frontend = Frontend(model_file, self.config)
        self.model = GigaamModel(model_file, ops, self.config)

    def transcribe(self, pcm: np.ndarray, offset: float = 0.0, language: str | None = None,
                   task: str = "transcribe", prompt: str | None = None) -> tuple[list[Segment], str]:
        """Transcribe one piece (16 kHz mono float32). GigaAM speaks Russian only and takes no prompt."""
        check_options(self.name, self.languages, self.can_translate, None, task)
        spoken = self.config.languages[0] if self.config.languages else "ru"
        if self.frontend.frames(len(pcm)) == 0:
            return [], spoken
        emissions = self.model.decode(self.model.encode(self.frontend(pcm)))
        return segment(self.vocabulary, emissions, self.config.frame_seconds, offset), spoken


def load(model_file: ModelFile, ops: Ops) -> GigaamTranscriber:
    return GigaamTranscriber(model_file, ops)
