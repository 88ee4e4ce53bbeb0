"""The Whisper family: log-mel frontend, encoder-decoder on a backend, byte-level BPE tokenizer."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sayso.engine.gguf.reader import ModelFile
from sayso.engine.ops import Backend
from sayso.engine.transcript import Segment
from sayso.engine.vad import CLOSING_PAUSE, CONTEXT_BEFORE
from sayso.engine.windows import MIN_WINDOW
from sayso.engine.whisper.decode import WINDOW_SECONDS, transcribe_window
from sayso.engine.whisper.frontend import HOP_LENGTH, BackendLogMel, LogMel
from sayso.engine.whisper.model import EncoderOutput, WhisperModel
from sayso.engine.whisper.tokenizer import Tokenizer

SAMPLE_RATE = 16000

SpeechAt = Callable[[np.ndarray], list[tuple[int, int]]]
"""The voice detector: the speech in some samples, as (start, end) sample indices (``Vad.segments``)."""

log = logging.getLogger(__name__)


@dataclass
class LongForm:
    """What a Whisper transcription carries from one window to the next, as OpenAI's ``transcribe`` and
    whisper.cpp do: the language (detected in the first window where it isn't given), the tokens of
    the text so far, the prompt's first, whose last ``limit`` condition the next window, and how many
    windows were decoded."""

    language: str | None
    task: str
    context: list[int]
    limit: int
    windows: int = 0


class WhisperTranscriber:
    """Transcribes audio of any length in windows of 30 s, each one starting where the text of the one
    before it ended and conditioned on that text (``long_form``, ``transcribe_window``)."""

    window_seconds = WINDOW_SECONDS
    stream_hooks = frozenset({"features", "encoded", "interrupt", "speech_at"})

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

    def long_form(self, language: str | None = None, task: str = "transcribe", prompt: str | None = None) -> LongForm:
        """What one audio's windows carry from one to the next (``transcribe_window``)."""
        if not self.multilingual:
            language = "en"
        context = self.tokenizer.encode(" " + prompt.strip()) if prompt and prompt.strip() else []
        limit = self.model.config.n_text_ctx // 2 - 1
        if len(context) > limit:
            log.warning("The prompt is %d tokens long; the model takes its last %d.", len(context), limit)
        return LongForm(language, task, context[-limit:], limit)

    def transcribe_window(self, state: LongForm, pcm: np.ndarray, offset: float = 0.0,
                          features: LogMel | BackendLogMel | None = None,
                          encoded: EncoderOutput | None = None, interrupt=None,
                          speech_at: SpeechAt | None = None) -> tuple[list[Segment], int]:
        """Segments of the window that starts at ``pcm``'s first sample, ``offset`` seconds into the audio
        (its first 30 s; less at the end of the audio), and the samples from its start to where the next
        window starts. ``state`` (from ``long_form``) is moved on to the next window only once this one is
        done, so a window that failed on a GPU runs again as it was on the CPU.

        ``features``: from ``features()``, fed every earlier, shorter start of ``pcm``; ``encoded``: the
        window already encoded (``encode_windows``), which it then is not again. A window after the first
        that holds less than 30 s ends audio longer than one: its features are ``end_features``.
        ``interrupt``: a ``threading.Event``; once it is set the work stops with ``errors.Interrupted``
        at the next encoder block or batch of decoder steps, ``state`` as it was. ``speech_at``: the voice
        detector (``engine.families``), which moves the next window to speech the text stopped short of
        (``read_on``).
        """
        full = int(self.window_seconds * SAMPLE_RATE)
        window = min(len(pcm), full)
        mel = encoded
        if mel is None and state.windows and window < full:  # the end of audio longer than one window
            mel = self.end_features(pcm)
        elif mel is None:
            mel = (features or self.features())(pcm, n_frames=2 * self.model.config.n_audio_ctx)
        text = transcribe_window(self.model, self.tokenizer, mel, language=state.language, task=state.task,
                                 prompt=state.context or None, offset=offset, duration=window / SAMPLE_RATE,
                                 interrupt=interrupt)
        state.language = text.language
        # A text that failed the quality checks (low confidence, a loop) would lead the next window astray.
        state.context = (state.context + text.tokens)[-state.limit:] if text.plausible else []
        state.windows += 1
        seek = int(round(text.seek * SAMPLE_RATE))
        seek = seek if 0 < seek <= window else window
        return text.segments, read_on(pcm[:window], text.segments, offset, seek, speech_at)

    def end_features(self, pcm: np.ndarray) -> np.ndarray:
        """Log-mel [n_mels, 2 * n_audio_ctx] of the last window of audio longer than one, shorter than a
        window: its own frames, then 0 in the normalised log-mel to the window's end. OpenAI's
        ``transcribe``, Hugging Face's ``generate`` and transcribe.cpp cut that window from the features
        of the whole audio and pad it so; padded with the silence floor that a short clip's padded audio
        gives, the model went on past the audio's end with words that weren't said (docs/PERFORMANCE.md:
        last window's padding). Computed on the host: once an audio, beside a window's encoder."""
        n_frames, n_mels = 2 * self.model.config.n_audio_ctx, self.model.config.n_mels
        sound = min(len(pcm) // HOP_LENGTH, n_frames)
        mel = np.zeros((n_frames, n_mels), np.float32)  # time-major, as the encoder reads it
        mel[:sound] = LogMel(self.filterbank, self.window)(pcm, n_frames=sound).T
        return mel.T

    def transcribe(self, pcm: np.ndarray, offset: float = 0.0, language: str | None = None,
                   task: str = "transcribe", prompt: str | None = None,
                   features: LogMel | BackendLogMel | None = None,
                   encoded: EncoderOutput | None = None, interrupt=None,
                   speech_at: SpeechAt | None = None) -> tuple[list[Segment], str]:
        """Segments of ``pcm`` of any length, in seconds from the start of the file, window after window
        (``transcribe_window``); ``features`` and ``encoded`` serve the first window, ``interrupt`` and
        ``speech_at`` every window."""
        state = self.long_form(language, task, prompt)
        segments: list[Segment] = []
        start = 0
        while len(pcm) - start >= MIN_WINDOW:
            found, seek = self.transcribe_window(state, pcm[start:], offset + start / SAMPLE_RATE,
                                                 features if start == 0 else None, encoded if start == 0 else None,
                                                 interrupt, speech_at)
            segments.extend(found)
            start += seek
        return segments, state.language or ""


def read_on(window: np.ndarray, segments: list[Segment], offset: float, seek: int,
            speech_at: SpeechAt | None) -> int:
    """Where the next window starts, given ``seek`` (OpenAI's rule, ``WindowText.seek``): where the text
    ended complete before its window did and the voice detector hears speech begin at least
    ``CLOSING_PAUSE`` after that end, at that speech, with up to ``CONTEXT_BEFORE`` of quiet before it.
    The decoder may end its text at a long silence though speech follows in the same window (a
    dictation's piece that spans a pause, a file's quiet stretch); OpenAI's rule passes over that speech
    unread. Speech heard sooner after the text's end is taken for its last words (the last timestamp may
    come a little early), never read twice (docs/PERFORMANCE.md: reading on past a pause)."""
    if speech_at is None or seek < len(window) or not segments:
        return seek
    end = int(round((segments[-1].end - offset) * SAMPLE_RATE))
    if not 0 < end < len(window) - MIN_WINDOW:
        return seek
    heard = speech_at(window[end:])
    pause = int(CLOSING_PAUSE * SAMPLE_RATE)
    later = [i for i, (start, _) in enumerate(heard) if start >= pause]
    if not later:
        return seek
    start = heard[later[0]][0]
    quiet_from = heard[later[0] - 1][1] if later[0] else 0
    return end + max(quiet_from, start - CONTEXT_BEFORE)


def load(model_file: ModelFile, ops: Backend) -> WhisperTranscriber:
    return WhisperTranscriber(model_file, ops)
