"""NVIDIA Parakeet (TDT v2/v3, and the RNN-T and CTC heads of the same family) from transcribe.cpp's
GGUF layout (``general.architecture = "parakeet"``).

``load(model_file, ops)`` returns the transcriber the engine drives: one piece of audio (up to
``window_seconds``) in, one segment with token timestamps (80 ms encoder frames) out.
"""

from __future__ import annotations

import numpy as np

from sayso.engine.conformer.text import Vocabulary, segment
from sayso.engine.options import check_options
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.ops import Ops
from sayso.engine.parakeet.config import ParakeetConfig
from sayso.engine.parakeet.frontend import Frontend
from sayso.engine.parakeet.model import ParakeetModel
from sayso.engine.transcript import Segment


class ParakeetTranscriber:
    """Parakeet on a backend: ``transcribe(pcm, offset, language, task, prompt) -> (segments, language)``."""

    window_seconds = 30.0
    """The engine's piece length (375 encoder frames): long enough for context, well inside the
    utterance lengths the models are trained on."""
    stream_hooks = frozenset()  # it keeps no frames between calls and is not interrupted

    def __init__(self, model_file: ModelFile, ops: Ops):
        self.config = ParakeetConfig.from_model_file(model_file)
        self.name = self.config.name
        self.languages, self.can_translate = self.config.languages, False
        self.vocabulary = Vocabulary.from_model_file(model_file)
        self.frontend = Frontend(self.config)
        self.model = ParakeetModel(model_file, ops, self.config)

    def transcribe(self, pcm: np.ndarray, offset: float = 0.0, language: str | None = None,
                   task: str = "transcribe", prompt: str | None = None) -> tuple[list[Segment], str]:
        """Transcribe one piece (16 kHz mono float32). ``prompt`` is ignored: Parakeet takes none."""
        check_options(self.name, self.languages, self.can_translate, None, task)
        spoken = language or (self.config.languages[0] if len(self.config.languages) == 1 else "")
        if self.frontend.frames(len(pcm)) < 2:  # too short for a frame and its normalisation
            return [], spoken
        encoded = self.model.encode(self.frontend(pcm))
        # transcribe.cpp leaves control pieces, <unk> and multilingual language tags ("<en-US>") out
        emissions = [e for e in self.model.decode(encoded) if not self.vocabulary.is_special(e.id)]
        return segment(self.vocabulary, emissions, self.config.frame_seconds, offset), spoken


def load(model_file: ModelFile, ops: Ops) -> ParakeetTranscriber:
    return ParakeetTranscriber(model_file, ops)
