"""Which model family a GGUF file holds, and the loader for it.

Each family is one package (``engine/whisper``, ...) exposing ``load(model_file, ops)`` that returns a
``Transcriber``: an object with ``window_seconds`` (the longest piece it takes at once), ``name``, and
``transcribe(pcm, offset, language, task, prompt) -> (segments, language)`` for one piece.

Two optional keyword arguments of ``transcribe`` serve live dictation (``engine.stream``), each taken
only by the families that declare it in their signature:

* ``features``: an object from the transcriber's ``features()`` that keeps the frontend's frames
  between calls on audio that grows at its end, so each frame is computed once (Whisper, Moonshine).
* ``interrupt``: a ``threading.Event``; once it is set the work stops with ``errors.Interrupted``
  (Moonshine, between encoder blocks and decoder steps).
"""

from __future__ import annotations

import importlib
import inspect

from sayso.engine.errors import ModelFileError
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.ops import Ops

FAMILIES = {
    "whisper": "sayso.engine.whisper",
    "moonshine": "sayso.engine.moonshine",
    "parakeet": "sayso.engine.parakeet",
    "gigaam": "sayso.engine.gigaam",
}
"""general.architecture -> package that loads it."""


def family(model_file: ModelFile):
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


def load(model_file: ModelFile, ops: Ops):
    """The family's transcriber for ``model_file`` on ``ops`` (its weights made in ``ops.loading()``)."""
    with ops.loading():
        return family(model_file).load(model_file, ops)


def stream_hooks(transcriber) -> frozenset[str]:
    """Which of the optional ``transcribe`` arguments (``features``, ``interrupt``) ``transcriber`` takes."""
    return frozenset(inspect.signature(transcriber.transcribe).parameters) & {"features", "interrupt"}
