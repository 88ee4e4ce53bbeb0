"""Which model family a GGUF file holds, and the loader for it.

Each family is one package (``engine/whisper``, ...; ``engine.catalogue.FAMILIES`` names them), a
``Family``: its ``load(model_file, ops)`` returns a ``Transcriber``, which transcribes one piece of
audio at a time (``engine.engine.Engine`` cuts longer audio into pieces).

Optional keyword arguments of ``transcribe`` serve live dictation (``engine.stream``) and long audio,
each passed only to the transcribers that declare it in their ``stream_hooks``:

* ``features``: an object from the transcriber's ``features()`` that keeps the frontend's frames
  between calls on audio that grows at its end, so each frame is computed once (Whisper, Moonshine).
* ``interrupt``: a ``threading.Event``; once it is set the work stops with ``errors.Interrupted``
  (Moonshine and Whisper, between encoder blocks and decoder steps).
* ``encoded``: the first window already encoded in a batch (Whisper, ``Engine.transcribe_many``).
* ``speech_at``: the voice detector, a function of samples giving their speech as (start, end) sample
  indices (``Vad.segments``): a family whose text may end before its window does (Whisper) reads on
  where speech follows.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from sayso.engine.catalogue import FAMILIES
from sayso.engine.errors import ModelFileError
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.ops import Backend
from sayso.engine.transcript import Segment


class Transcriber(Protocol):
    """A family's model on a backend, as the engine and a dictation's stream drive it."""

    name: str
    window_seconds: float
    """The longest piece of audio it takes at once."""
    can_translate: bool
    stream_hooks: frozenset[str]
    """The optional ``transcribe`` arguments it takes (module docstring); with ``features`` it has a
    ``features()`` method too."""

    @property
    def languages(self) -> Sequence[str]:
        """The languages it transcribes (``engine.options.check_options``)."""

    def transcribe(self, pcm: np.ndarray, offset: float = 0.0, language: str | None = None,
                   task: str = "transcribe", prompt: str | None = None) -> tuple[list[Segment], str]:
        """Segments of one piece of 16 kHz mono audio, in seconds from ``offset``, and the language
        spoken; a transcriber that declares ``stream_hooks`` takes those as keyword arguments too."""


class Family(Protocol):
    """A model family's package."""

    def load(self, model_file: ModelFile, ops: Backend) -> Transcriber:
        """The family's transcriber for ``model_file``, its weights made on ``ops``."""


def family(model_file: ModelFile) -> Family:
    """The package of ``model_file``'s family, imported; a clear error for families we lack."""
    architecture = str(model_file.get("general.architecture", ""))
    package = FAMILIES.get(architecture)
    if package is None:
        supported = ", ".join(sorted(FAMILIES))
        raise ModelFileError(
            model_file.path,
            f"holds a '{architecture or 'unknown'}' model, which this version of Sayso can't run",
            f"Supported families: {supported}.",
        )
    return importlib.import_module(package)


def load(model_file: ModelFile, ops: Backend) -> Transcriber:
    """The family's transcriber for ``model_file`` on ``ops`` (its weights made in ``ops.loading()``)."""
    if ops.reads_weights_in_place:
        model_file.copy_in_background()
    with ops.loading():
        return family(model_file).load(model_file, ops)

