"""Long audio as Whisper reads it (``engine.windows``, ``WhisperTranscriber.transcribe_window``), on a
minute of a lecture with whisper-tiny.en on the numpy backend: every window starts where the last
complete segment of the one before it ended, is conditioned on the text before it, the last window's
features are padded as transcribe.cpp pads them, and the minute takes no more encoder windows than
transcribe.cpp's."""

from __future__ import annotations

import numpy as np
import pytest
from support.data import AUDIO, TINY_EN_GGUF, needs_clips

from sayso.engine.accuracy import their_windows
from sayso.engine.audio import load_audio
from sayso.engine.engine import Engine
from sayso.engine.segmenter import SAMPLE_RATE
from sayso.engine.whisper.frontend import HOP_LENGTH

LECTURE = "lecture-60s.wav"


@pytest.fixture(scope="module")
def windows():
    """Each window the engine decoded in the lecture: (its start in seconds, the prompt it was given, its
    segments, the samples to the next window's start), the minute's PCM and transcript, the tokenizer,
    and the log-mel features [n_mels, frames] each window's encoder was given."""
    engine = Engine(TINY_EN_GGUF, device="cpu", vad=False)
    transcriber, decoded, features = engine.transcriber, [], []
    transcribe_window, encode = transcriber.transcribe_window, transcriber.model.encode

    def recorded(state, pcm, offset, **kwargs):
        prompt = list(state.context)
        segments, seek = transcribe_window(state, pcm, offset, **kwargs)
        decoded.append((offset, prompt, segments, seek))
        return segments, seek

    def encoded(mel, interrupt=None):
        features.append(np.array(mel))
        return encode(mel, interrupt)

    transcriber.transcribe_window, transcriber.model.encode = recorded, encoded
    pcm = load_audio(AUDIO / LECTURE)
    return decoded, pcm, engine.transcribe(pcm), transcriber.tokenizer, features


@needs_clips(LECTURE)
def test_each_window_starts_at_the_last_complete_segment_of_the_one_before(windows):
    decoded, pcm, transcript, _, _ = windows
    assert len(decoded) >= 2 and decoded[0][0] == 0.0
    for (offset, _, segments, seek), (following, _, _, _) in zip(decoded, decoded[1:]):
        assert following == pytest.approx(offset + seek / SAMPLE_RATE)
        if seek < 30 * SAMPLE_RATE:  # cut off mid-segment: moved by the end of its last complete one
            assert following == pytest.approx(segments[-1].end)
    assert transcript.segments == [s for _, _, segments, _ in decoded for s in segments]
    assert transcript.duration == pytest.approx(len(pcm) / SAMPLE_RATE)


@needs_clips(LECTURE)
def test_each_window_is_conditioned_on_the_text_before_it(windows):
    decoded, _, _, tokenizer, _ = windows
    assert decoded[0][1] == []  # no prompt was given
    for (_, _, segments, _), (_, prompt, _, _) in zip(decoded, decoded[1:]):
        said = tokenizer.decode(prompt)
        assert said.endswith(" ".join(s.text for s in segments)) or said.endswith(segments[-1].text)
        assert len(prompt) <= 223 and any(tokenizer.is_timestamp(t) for t in prompt)


@needs_clips(LECTURE)
def test_a_minute_takes_no_more_windows_than_transcribe_cpp(windows):
    decoded, pcm, _, _, _ = windows
    assert len(decoded) <= their_windows(TINY_EN_GGUF, pcm)


@needs_clips(LECTURE)
def test_the_last_window_is_padded_past_the_audio_with_zeros_as_transcribe_cpp_pads_it(windows):
    """The minute's last window holds less than 30 s: its log-mel is the audio's, then 0 (the normalised
    log-mel's zero, as OpenAI's transcribe, Hugging Face and transcribe.cpp pad a long audio's last window),
    not the silence floor (below 0) that a short clip's padded audio gives; the first window is all audio."""
    decoded, pcm, _, _, features = windows
    def zero_frames(mel):
        return np.all(mel == 0, axis=0)

    assert len(features) == len(decoded) and not np.any(zero_frames(features[0]))
    sound = (len(pcm) - round(decoded[-1][0] * SAMPLE_RATE)) // HOP_LENGTH
    last = features[-1]
    assert 0 < sound < last.shape[1]
    assert np.all(zero_frames(last[:, sound:])) and not np.any(zero_frames(last[:, :sound]))
