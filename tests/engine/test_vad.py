"""Voice activity: Silero VAD's network in numpy against onnxruntime; its segments of the shared clips, the
same whatever the chunks; a take without speech gives no text (never Whisper's "Thank you." or "you"),
offline and streamed; hands-free status."""

from __future__ import annotations

import hashlib
import importlib.resources
from pathlib import Path

import numpy as np
import pytest

from support.data import AUDIO, TINY_EN_GGUF, needs_clips
from sayso.engine.audio import load_audio
from sayso.engine.silero import BLOCK, MODEL_SHA256, model_path
from sayso.engine.vad import SAMPLE_RATE, Vad, speech_segments, speech_span


def seconds(segments):
    return [(round(start / SAMPLE_RATE, 2), round(end / SAMPLE_RATE, 2)) for start, end in segments]


def test_jfk_speech_from_the_first_word_to_the_last():
    pcm = load_audio(AUDIO / "jfk.wav")
    segments = speech_segments(pcm)
    assert len(segments) == 4  # four phrases, with pauses between
    assert all(a < b < c < d for (a, b), (c, d) in zip(segments, segments[1:]))
    # "And so" starts at 0.35 s; "country" ends at 10.6 s, then a clap at 10.9 s too short to count
    assert 0.25 < segments[0][0] / SAMPLE_RATE < 0.45 and 10.4 < segments[-1][1] / SAMPLE_RATE < 10.7
    assert speech_span(pcm) == (0, len(pcm), segments[0][0])  # speech 0.35 s in: the model hears all of it
    later = np.concatenate([np.zeros(5 * SAMPLE_RATE, np.float32), pcm])  # 5 s of silence first
    start, end, _ = speech_span(later)
    assert end == len(later) and abs(start - (speech_segments(later)[0][0] - 2 * SAMPLE_RATE)) == 0
    assert abs(start / SAMPLE_RATE - 3.35) < 0.1  # from 2 s before "And so"


@pytest.mark.parametrize("clip", ["jfk.wav", "beckett.wav", "commands/goforward.wav"])
def test_chunks_of_any_size_give_the_segments_of_the_whole(clip):
    pcm = load_audio(AUDIO / clip)
    vad, rng, at = Vad(), np.random.default_rng(7), 0
    while at < len(pcm):
        size = int(rng.integers(1, 6000))
        vad.feed(pcm[at : at + size])
        at += size
    assert vad.segments() == speech_segments(pcm)
    assert vad.samples == len(pcm)


def noises() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    white = rng.standard_normal(5 * SAMPLE_RATE)
    brown = np.cumsum(rng.standard_normal(5 * SAMPLE_RATE))
    brown -= np.convolve(brown, np.ones(400) / 400, "same")  # no drift: a rumble, not a ramp
    return {
        "silence": np.zeros(5 * SAMPLE_RATE, np.float32),
        "white noise": (0.1 * white).astype(np.float32),
        "brown noise": (0.3 * brown / np.abs(brown).max()).astype(np.float32),
    }


@pytest.mark.parametrize("kind", ["silence", "white noise", "brown noise"])
def test_no_speech_in_silence_or_noise(kind):
    assert speech_segments(noises()[kind]) == []


@pytest.mark.parametrize("clip", ["jfk.wav", "white noise"])
def test_numpy_network_gives_onnxruntimes_probabilities(clip):
    """``engine.silero`` runs Silero's network in numpy with the ONNX file's weights, a run of windows
    ``BLOCK`` at a time (jfk.wav spans several blocks); onnxruntime runs the same file one window at a
    time, as Silero's own code does."""
    import onnxruntime

    pcm = noises()[clip] if clip in noises() else load_audio(AUDIO / clip)
    session = onnxruntime.InferenceSession(str(model_path()), providers=["CPUExecutionProvider"])
    state, context, theirs = np.zeros((2, 1, 128), np.float32), np.zeros(64, np.float32), []
    for start in range(0, len(pcm) // 512 * 512, 512):
        window = np.concatenate([context, pcm[start : start + 512]])
        probability, state = session.run(None, {"input": window[None], "state": state, "sr": np.array(SAMPLE_RATE)})
        theirs.append(float(probability[0, 0]))
        context = window[-64:]
    assert clip != "jfk.wav" or len(theirs) > 2 * BLOCK
    vad = Vad()
    vad.feed(pcm)
    np.testing.assert_allclose(vad.probabilities, theirs, atol=1e-5)
    np.testing.assert_allclose(vad._state, state, atol=1e-4)


@pytest.fixture(scope="module")
def engines(moonshine_tiny):
    from sayso.engine.engine import Engine

    return {"whisper-tiny.en": Engine(TINY_EN_GGUF, device="cpu"), "moonshine-tiny": Engine(moonshine_tiny, device="cpu")}


@pytest.mark.parametrize("model", ["whisper-tiny.en", "moonshine-tiny"])
@pytest.mark.parametrize("kind", ["silence", "white noise"])
def test_a_take_without_speech_gives_no_text(engines, model, kind):
    engine, pcm = engines[model], noises()[kind]
    transcript = engine.transcribe(pcm)
    assert transcript.text == "" and transcript.segments == [] and transcript.duration == 5.0
    session = engine.stream(background=False)
    for start in range(0, len(pcm), 1600):
        assert session.feed(pcm[start : start + 1600]) == ""
    assert session.finish() == transcript


@needs_clips("commands/goforward.wav")
def test_hands_free_status_ends_after_the_pause():
    pcm = load_audio(AUDIO / "commands/goforward.wav")  # "go forward ten meters", speech ends at 2.2 s
    vad = Vad(pause=0.8)
    statuses = [vad.feed(pcm[start : start + 1600]) for start in range(0, len(pcm), 1600)]
    assert not statuses[0].speech and any(s.speech for s in statuses) and not any(s.ended for s in statuses)
    quiet = [vad.feed(np.zeros(1600, np.float32)) for _ in range(10)]  # one more second of silence
    ended_at = (len(pcm) + 1600 * (1 + [s.ended for s in quiet].index(True))) / SAMPLE_RATE
    last_speech = speech_segments(pcm)[-1][1] / SAMPLE_RATE  # where the quiet began
    assert 0.8 <= ended_at - last_speech < 0.8 + 0.1  # within one 0.1 s chunk of the pause


def test_the_model_ships_in_the_package_with_its_licence():
    """No download at first start: Silero's file (MIT) is package data, beside its licence."""
    path = model_path()
    assert path.parent == Path(importlib.resources.files("sayso.resources"))
    assert hashlib.sha256(path.read_bytes()).hexdigest() == MODEL_SHA256
    assert "MIT License" in (path.parent / "silero_vad.LICENSE.txt").read_text()


FAULTS_PER_CALL = """
import resource, sys
from sayso.engine.audio import load_audio
from sayso.engine.engine import Engine
engine, pcm = Engine(sys.argv[1], device="gpu"), load_audio(sys.argv[2])
for _ in range(3):
    engine.speech_span(pcm)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    engine.speech_span(pcm)
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
"""


@pytest.mark.gpu
def test_detecting_speech_again_takes_no_fresh_memory():
    """The engine has glibc keep large freed blocks for reuse (``engine.heap``): in a fresh process
    whose model went to the GPU (whose load frees no large block of its own), Silero's arrays for
    jfk.wav would be new mappings on every call, thousands of page faults each (docs/PERFORMANCE.md:
    glibc heap thresholds)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FAULTS_PER_CALL, str(TINY_EN_GGUF), str(AUDIO / "jfk.wav")],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    faults = float(done.stdout.split()[-1])
    print(f"\npage faults per call: {faults}")
    assert faults < 100
