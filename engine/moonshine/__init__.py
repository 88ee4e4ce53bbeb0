"""The Moonshine family: raw-waveform conv stem, encoder-decoder on a backend, SentencePiece-style tokenizer.

Moonshine (Useful Sensors, tiny and base) is made for live dictation: it encodes exactly the audio it
is given, so a two-second command costs a tenth of a 20 s piece, where Whisper always pays for 30 s.
"""

from __future__ import annotations

import numpy as np

from sayso.engine.gguf.reader import ModelFile
from sayso.engine.moonshine.decode import transcribe_utterance
from sayso.engine.moonshine.model import MoonshineModel, Stem
from sayso.engine.moonshine.tokenizer import Tokenizer
from sayso.engine.ops import Ops
from sayso.engine.options import check_options
from sayso.engine.transcript import Segment

WINDOW_SECONDS = 30.0
"""The longest piece: 6.5 tokens a second fill the decoder's 193 positions at 30 s, and Moonshine was
trained on utterances, not long recordings."""


class MoonshineTranscriber:
    """Transcribes pieces of up to ``window_seconds``; the engine cuts longer audio into such pieces at
    its quietest moments (``engine.segmenter``). Whisper's long-form reading, each window starting where
    the text of the one before ended and conditioned on it, needs timestamps and a prompt, and Moonshine
    has neither: its text can't say where in the piece it stopped, so a cut must fall where no word is
    (docs/PERFORMANCE.md: Moonshine's pieces)."""

    window_seconds = WINDOW_SECONDS
    stream_hooks = frozenset({"features", "interrupt"})

    def __init__(self, model_file: ModelFile, ops: Ops):
        self.name = str(model_file.get("stt.variant") or model_file.get("general.name") or model_file.path.stem)
        self.model = MoonshineModel(model_file, ops)
        self.tokenizer = Tokenizer.from_model_file(model_file)
        self.language = str(model_file.get("general.languages", ["en"])[0])
        self.languages, self.can_translate = (self.language,), False

    def features(self) -> Stem:
        """A keeper of the stem's first convolution for audio that grows at its end (a dictation being
        spoken), to pass as ``transcribe(..., features=)`` each time the audio so far is transcribed."""
        return Stem(self.model)

    def transcribe(self, pcm: np.ndarray, offset: float = 0.0, language: str | None = None,
                   task: str = "transcribe", prompt: str | None = None,
                   features: Stem | None = None, interrupt=None) -> tuple[list[Segment], str]:
        """The segment of one piece, in seconds from the start of the file.

        Each Moonshine model hears one language (English for tiny and base), whatever ``language``
        asks for, as Whisper's English-only models do; it takes no prompt (``prompt`` is ignored) and
        can't translate. ``features``: from ``features()``, fed every earlier, shorter start of ``pcm``.
        ``interrupt``: a ``threading.Event``; once set, the work stops with ``errors.Interrupted``.
        """
        check_options(self.name, self.languages, self.can_translate, None, task)
        return transcribe_utterance(self.model, self.tokenizer, pcm, offset, features, interrupt), self.language


def load(model_file: ModelFile, ops: Ops) -> MoonshineTranscriber:
    return MoonshineTranscriber(model_file, ops)
