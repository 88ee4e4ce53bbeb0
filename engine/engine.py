"""The engine's front door: load a model on a backend, transcribe audio of any length.

``Engine`` knows nothing of model internals: the family's transcriber handles one piece of audio
(at most its window, 30 s for Whisper) and the engine cuts long audio at quiet moments, shifts each
piece's timestamps onto the file, reports progress and honours cancellation between pieces.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from engine import audio, families, models
from engine.backend import DeviceChoice, make_ops
from engine.errors import SaysoError
from engine.gguf.reader import ModelFile
from engine.segmenter import SAMPLE_RATE, pieces
from engine.transcript import Segment, Transcript

Progress = Callable[[float], None]


class Cancelled(SaysoError):
    """The caller cancelled a transcription (``cancel`` event set)."""

    def __init__(self) -> None:
        super().__init__("Transcription cancelled.")


class Engine:
    """A model loaded on a backend. Not thread-safe: one thread (the app's engine thread) owns it."""

    def __init__(self, model: str | Path | None = None, device: DeviceChoice = "auto", notify: Callable[[str], None] | None = None):
        progress = (lambda fraction, message: notify(message)) if notify else None
        path = models.resolve(model, progress) if model else models.default_model(progress)
        self.model_file = ModelFile(path)
        self.ops = make_ops(device)
        self.transcriber = families.load(self.model_file, self.ops)
        self.model_name = self.transcriber.name

    def describe(self) -> str:
        return f"{self.model_name} on {self.ops.describe()}"

    def transcribe(self, pcm: np.ndarray, language: str | None = None, task: str = "transcribe",
                   prompt: str | None = None, progress: Progress | None = None,
                   cancel: threading.Event | None = None) -> Transcript:
        """Transcribe 16 kHz mono float32 samples of any length."""
        pcm = np.asarray(pcm, np.float32).reshape(-1)
        return self._run([pcm], len(pcm) / SAMPLE_RATE, language, task, prompt, progress, cancel)

    def transcribe_file(self, path: str | Path, language: str | None = None, task: str = "transcribe",
                        prompt: str | None = None, progress: Progress | None = None,
                        cancel: threading.Event | None = None) -> Transcript:
        """Transcribe an audio or video file, decoding it as a stream so long files stay in bounded memory."""
        total = audio.duration(path)
        return self._run(audio.stream_audio(path), total, language, task, prompt, progress, cancel)

    def _run(self, chunks: Iterable[np.ndarray], total: float, language, task, prompt, progress, cancel) -> Transcript:
        segments: list[Segment] = []
        duration = 0.0
        window = self.transcriber.window_seconds
        for offset, piece in pieces(chunks, max_seconds=window):
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            found, language = self.transcriber.transcribe(piece, offset=offset, language=language, task=task, prompt=prompt)
            segments.extend(found)
            duration = offset + len(piece) / SAMPLE_RATE
            if progress is not None and total > 0:
                progress(min(1.0, duration / total))
        if progress is not None:
            progress(1.0)
        text = " ".join(s.text.strip() for s in segments if s.text.strip())
        return Transcript(text=text, segments=segments, language=language or "", duration=duration, model=self.model_name)

    def close(self) -> None:
        device = getattr(self.ops, "device", None)
        if device is not None:
            device.close()
