"""The Whisper family: log-mel frontend, encoder-decoder on a backend, byte-level BPE tokenizer."""

from __future__ import annotations

import numpy as np

from sayso.engine.gguf.reader import ModelFile
from sayso.engine.ops import Backend
from sayso.engine.transcript import Segment
from sayso.engine.whisper.decode import WINDOW_SECONDS, transcribe_window
from sayso.engine.whisper.frontend import BackendLogMel, LogMel
from sayso.engine.whisper.model import EncoderOutput, WhisperModel
from sayso.engine.whisper.tokenizer import Tokenizer

SAMPLE_RATE = 16000


class WhisperTranscriber:
    """Transcribes pieces of up to 30 s; the engine cuts longer audio into such pieces."""

    window_seconds = WINDOW_SECONDS
    stream_hooks = frozenset({"features", "encoded"})

    def __init__(self, model_file: ModelFile, ops: Backend):
        self.name = str(model_file.get("stt.variant") or model_file.get("general.name") or model_file.path.stem)
        self.model = WhisperModel(model_file, ops)
        self.tokenizer = Tokenizer(
            model_file.require("tokenizer.ggml.tokens"),
            model_file.require("tokenizer.ggml.merges"),
            model_file.require("tokenizer.ggml.token_type"),
        )
        self.filterbank = model_file.array("frontend.mel_filterbank")
        self.window = model_file.array("frontend.window")
        self.multilingual = bool(model_file.get("stt.capability.lang_detect", False))
        self.languages = tuple(self.tokenizer.language_tokens()) if self.multilingual else ("en",)
        self.can_translate = self.model.config.can_translate
        self.backend_features = BackendLogMel(ops, self.filterbank, self.window) if ops.features_on_backend else None

    def features(self) -> LogMel | BackendLogMel:
        """A keeper of log-mel frames for audio that grows at its end (a dictation being spoken), to pass
        as ``transcribe(..., features=)`` each time the audio so far is transcribed. A backend that
        computes the features itself keeps none: every call gets its one ``BackendLogMel``."""
        return self.backend_features if self.backend_features is not None else LogMel(self.filterbank, self.window)

    @property
    def window_bytes(self) -> int:
        """Memory one more window takes in a batched encoder pass: its float32 activations while the pass
        runs (the mel and its unfolded rows, the stem's output, then a block's x, norm, q, k, v,
        attention, FFN hidden of 4d and their like: about 16d a position) and its f16 cross-attention
        K and V, kept until it is decoded."""
        c = self.model.config
        frames, d = 2 * c.n_audio_ctx, c.n_audio_state
        activations = 4 * (frames * (4 * c.n_mels + d) + c.n_audio_ctx * 16 * d)
        cross_caches = c.n_text_layer * 2 * c.n_audio_ctx * c.n_text_state * 2
        return activations + cross_caches

    @property
    def window_largest_bytes(self) -> int:
        """Bytes one more window adds to a batched pass's largest tensor, the FFN's hidden layer (4d
        floats a position): a batch keeps that tensor within ``Ops.max_tensor_bytes``."""
        c = self.model.config
        return c.n_audio_ctx * 4 * c.n_audio_state * 4

    def encode_windows(self, pieces: list[np.ndarray]) -> list[EncoderOutput]:
        """The first window of each piece (its first 30 s) encoded in one pass (``WhisperModel.encode_many``),
        each what ``transcribe(piece, ..., encoded=)`` takes for it."""
        n_frames = 2 * self.model.config.n_audio_ctx
        return self.model.encode_many([self.features()(pcm, n_frames=n_frames) for pcm in pieces])

    def transcribe(self, pcm: np.ndarray, offset: float = 0.0, language: str | None = None,
                   task: str = "transcribe", prompt: str | None = None,
                   features: LogMel | BackendLogMel | None = None,
                   encoded: EncoderOutput | None = None) -> tuple[list[Segment], str]:
        """Segments of one piece (at most 30 s), in seconds from the start of the file.

        When the decoder stops mid-sentence (its last segment has no closing timestamp), the rest
        of the piece is decoded again from that segment's start, as OpenAI's ``transcribe`` seeks.
        ``features``: from ``features()``, fed every earlier, shorter start of ``pcm``; it serves the
        first window (a window after a seek starts a new grid of frames). ``encoded``: the first window
        already encoded (``encode_windows``), which it then is not again.
        """
        if not self.multilingual:
            language = "en"
        segments: list[Segment] = []
        start = 0
        while len(pcm) - start >= SAMPLE_RATE // 10:  # less than 0.1 s of audio holds no word
            rest = pcm[start:]
            if encoded is not None and start == 0:
                mel = encoded
            else:
                frontend = features if features is not None and start == 0 else self.features()
                mel = frontend(rest, n_frames=2 * self.model.config.n_audio_ctx)
            begin = offset + start / SAMPLE_RATE
            found, language, resume = transcribe_window(
                self.model, self.tokenizer, mel, language=language, task=task, prompt=prompt,
                offset=begin, duration=len(rest) / SAMPLE_RATE,
            )
            if resume is None or resume <= begin:
                segments.extend(found)
                break
            segments.extend(s for s in found if s.end <= resume)
            start = int(round((resume - offset) * SAMPLE_RATE))
        return segments, language or ""


def load(model_file: ModelFile, ops: Backend) -> WhisperTranscriber:
    return WhisperTranscriber(model_file, ops)
