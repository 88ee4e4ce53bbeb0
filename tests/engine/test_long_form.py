"""Long audio as Whisper reads it (``engine.windows``, ``WhisperTranscriber.transcribe_window``), on a
minute of a lecture with whisper-tiny.en on the numpy backend: every window starts where the last
complete segment of the one before it ended, is conditioned on the text before it, and the minute takes
no more encoder windows than transcribe.cpp's."""

from __future__ import annotations

import pytest
from conftest import AUDIO, TINY_EN_GGUF, needs_clips

from sayso.engine.accuracy import their_windows
from sayso.engine.audio import load_audio
from sayso.engine.engine import Engine
from sayso.engine.segmenter import SAMPLE_RATE

LECTURE = "lecture-60s.wav"


@pytest.fixture(scope="module")
def windows():
    """Each window the engine decoded in the lecture: (its start in seconds, the prompt it was given, its
    segments, the samples to the next window's start), and the minute's PCM and transcript."""
    engine = Engine(TINY_EN_GGUF, device="cpu", vad=False)
    transcriber, decoded = engine.transcriber, []
    transcribe_window = transcriber.transcribe_window

    def recorded(state, pcm, offset, **kwargs):
        prompt = list(state.context)
        segments, seek = transcribe_window(state, pcm, offset, **kwargs)
        decoded.append((offset, prompt, segments, seek))
        return segments, seek

    transcriber.transcribe_window = recorded
    pcm = load_audio(AUDIO / LECTURE)
    return decoded, pcm, engine.transcribe(pcm), transcriber.tokenizer


@needs_clips(LECTURE)
def test_each_window_starts_at_the_last_complete_segment_of_the_one_before(windows):
    decoded, pcm, transcript, _ = windows
    assert len(decoded) >= 2 and decoded[0][0] == 0.0
    for (offset, _, segments, seek), (following, _, _, _) in zip(decoded, decoded[1:]):
        assert following == pytest.approx(offset + seek / SAMPLE_RATE)
        if seek < 30 * SAMPLE_RATE:  # cut off mid-segment: moved by the end of its last complete one
            assert following == pytest.approx(segments[-1].end)
    assert transcript.segments == [s for _, _, segments, _ in decoded for s in segments]
    assert transcript.duration == pytest.approx(len(pcm) / SAMPLE_RATE)


@needs_clips(LECTURE)
def test_each_window_is_conditioned_on_the_text_before_it(windows):
    decoded, _, _, tokenizer = windows
    assert decoded[0][1] == []  # no prompt was given
    for (_, _, segments, _), (_, prompt, _, _) in zip(decoded, decoded[1:]):
        said = tokenizer.decode(prompt)
        assert said.endswith(" ".join(s.text for s in segments)) or said.endswith(segments[-1].text)
        assert len(prompt) <= 223 and any(tokenizer.is_timestamp(t) for t in prompt)


@needs_clips(LECTURE)
def test_a_minute_takes_no_more_windows_than_transcribe_cpp(windows):
    decoded, pcm, _, _ = windows
    assert len(decoded) <= their_windows(TINY_EN_GGUF, pcm)
