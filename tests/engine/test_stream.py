"""Streaming dictation on the numpy backend: the final transcript of a stream session equals offline
transcription of the same audio (text, segments, token times and probabilities) for every shared clip
and both Moonshine tiny and Whisper tiny.en, fed in chunks of 0.1-0.5 s; partial text shows up while
the speaker is still speaking; the frontends' kept frames equal frames computed at once."""

from __future__ import annotations

import csv
import time

import numpy as np
import pytest

from conftest import AUDIO, TINY_EN_GGUF, needs_clips
from sayso.engine.audio import load_audio
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.segmenter import SAMPLE_RATE
from sayso.engine.whisper.frontend import N_FRAMES, LogMel, log_mel

MODELS = ("moonshine-tiny", "whisper-tiny.en")


def clips() -> list[str]:
    with open(AUDIO / "transcripts.tsv", encoding="utf-8") as f:
        return [row["file"] for row in csv.DictReader(f, delimiter="\t")]


@pytest.fixture(scope="module")
def engines(moonshine_tiny):
    from sayso.engine.engine import Engine

    return {"moonshine-tiny": Engine(moonshine_tiny, device="cpu"), "whisper-tiny.en": Engine(TINY_EN_GGUF, device="cpu")}


def chunks(pcm: np.ndarray, seed: int):
    """``pcm`` in chunks of 0.1 to 0.5 s, as a microphone's blocks reach the engine."""
    rng, at = np.random.default_rng(seed), 0
    while at < len(pcm):
        size = int(rng.integers(SAMPLE_RATE // 10, SAMPLE_RATE // 2 + 1))
        yield pcm[at : at + size]
        at += size


@pytest.mark.parametrize("model", MODELS)
def test_final_equals_offline_for_every_clip(engines, model, monkeypatch):
    """Passes run inside ``feed`` (no thread), so which passes ran before the end is the same on every
    run. Moonshine runs partial passes too, one a second (each reusing the stem rows of the one before);
    for Whisper, whose every pass encodes 30 s, only a piece cut at the 30 s limit is transcribed before
    the end (``partials`` off); the budget that stops passes on a CPU is lifted, as on a GPU."""
    monkeypatch.setattr("sayso.engine.stream.MIN_STEP", 1.0)
    monkeypatch.setattr("sayso.engine.stream.UNINTERRUPTIBLE_BUDGET", 60.0)
    engine = engines[model]
    for seed, clip in enumerate(clips()):
        pcm = load_audio(AUDIO / clip)
        offline = engine.transcribe(pcm)
        session = engine.stream(background=False, partials=model == "moonshine-tiny")
        for chunk in chunks(pcm, seed):
            session.feed(chunk)
        assert session.finish() == offline, clip
        assert offline.text, clip


@pytest.mark.parametrize("model", MODELS)
def test_partial_text_while_speaking(engines, model, monkeypatch):
    monkeypatch.setattr("sayso.engine.stream.UNINTERRUPTIBLE_BUDGET", 60.0)  # Whisper as on a GPU (see above)
    pcm = load_audio(AUDIO / "jfk.wav")
    session = engines[model].stream(background=False)
    shown = [session.feed(pcm[start : start + 1600]) for start in range(0, len(pcm) - 1600, 1600)]
    assert any(shown[: len(shown) // 2])  # text within the first half of the speech
    assert "fellow" in " ".join(shown).lower()  # "And so my fellow Americans" before the end
    session.feed(pcm[len(pcm) - 1600 :])
    assert session.finish() == engines[model].transcribe(pcm)


@needs_clips("beckett.wav")
def test_passes_on_the_session_thread_show_text_while_audio_arrives(engines):
    """Fed at four times real time, Moonshine tiny's passes run on the session's own thread: text
    arrives while audio still does, and ``finish`` runs the final pass on the whole take."""
    engine = engines["moonshine-tiny"]
    pcm = load_audio(AUDIO / "beckett.wav")
    session = engine.stream()
    shown = []
    for start in range(0, len(pcm), 1600):
        shown.append(session.feed(pcm[start : start + 1600]))
        time.sleep(0.1 / 4)
    transcript = session.finish()
    assert any(shown) and transcript == engine.transcribe(pcm)
    assert "fail better" in transcript.text.lower()


@needs_clips("beckett.wav")
def test_whisper_on_a_cpu_leaves_the_work_to_finish(engines):
    """A pass Whisper can't drop takes seconds on a CPU: once one has, no more run on the unfinished
    piece (the key-up would wait for it), and ``finish`` does the work, still equal to offline."""
    engine = engines["whisper-tiny.en"]
    pcm = load_audio(AUDIO / "beckett.wav")
    engine.pass_seconds = 3.0  # as measured here in an earlier dictation
    session = engine.stream(background=False)
    assert all(session.feed(pcm[start : start + 1600]) == "" for start in range(0, len(pcm), 1600))
    assert session.finish() == engine.transcribe(pcm)


@needs_clips("cards/001.wav")
def test_a_second_stream_sees_none_of_the_first(engines):
    engine = engines["moonshine-tiny"]
    first = engine.stream(background=False)
    first.feed(load_audio(AUDIO / "jfk.wav"))
    first.close()
    pcm = load_audio(AUDIO / "cards/001.wav")
    second = engine.stream(background=False)
    second.feed(pcm)
    assert second.finish() == engine.transcribe(pcm)
    with pytest.raises(Exception, match="finished"):
        second.feed(pcm)


def test_log_mel_kept_frames_equal_frames_computed_at_once():
    """The frames ``LogMel`` keeps for audio that grows (and that ends earlier than before, as a span
    trimmed at a pause does) are bit for bit those of one call on the final audio."""
    model_file = ModelFile(TINY_EN_GGUF)
    filterbank, window = model_file.array("frontend.mel_filterbank"), model_file.array("frontend.window")
    pcm = load_audio(AUDIO / "jfk.wav")
    kept = LogMel(filterbank, window)
    for end in (3000, 5000, 40000, 40160, 40359, 96000, 90000, len(pcm)):
        assert np.array_equal(kept(pcm[:end], n_frames=N_FRAMES), log_mel(pcm[:end], filterbank, window, N_FRAMES)), end
