"""The engine thread: the real Engine behind EngineClient, driven through its signals and its jobs' only."""

import os
import time

import numpy as np
import pytest
import soundfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop, QTimer  # noqa: E402

from sayso.app.core.engine_worker import PRIORITY_DICTATION, EngineClient  # noqa: E402
from sayso.app.core.jobs import JobHandle  # noqa: E402

from support.data import AUDIO, TINY_EN_GGUF, needs_clips  # noqa: E402
from support.qt import wait_for  # noqa: E402
from support.texts import JFK_WORDS, words  # noqa: E402

MODEL = TINY_EN_GGUF
JFK = AUDIO / "jfk.wav"
LECTURE = AUDIO / "lecture-60s.wav"


class Signals:
    """Every signal of the jobs watched, in order, as (name, job id, args)."""

    def __init__(self):
        self.events = []

    def watch(self, job: JobHandle) -> JobHandle:
        for name in ("started", "progress", "finished", "failed", "cancelled"):
            getattr(job, name).connect(lambda *args, n=name, j=job.id: self.events.append((n, j, args)))
        return job

    def of(self, name: str) -> list:
        """(job id, *args) of every ``name`` signal."""
        return [(j, *args) for n, j, args in self.events if n == name]


@pytest.fixture(scope="module")
def client(qapp):
    engine = EngineClient()
    engine.load(str(MODEL), "cpu")
    wait_for(engine.loaded)
    yield engine
    engine.shutdown()


def test_loaded_model_is_described(client):
    assert client.ready and client.load_error is None
    assert client.model_name and client.description


def test_dictation_audio_is_transcribed_with_progress(client):
    pcm, _ = soundfile.read(JFK, dtype="float32")
    seen = Signals()
    job = seen.watch(client.submit_pcm(pcm, language="en"))
    (transcript,) = wait_for(job.finished)
    assert words(transcript.text) == JFK_WORDS
    assert transcript.model
    assert seen.of("started") == [(job.id,)]
    fractions = [f for _, f in seen.of("progress")]
    assert fractions and fractions[-1] == 1.0 and fractions == sorted(fractions)


def test_the_gui_thread_keeps_running_while_the_engine_works(client):
    ticks = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(time.monotonic()))
    timer.start(10)
    started = time.monotonic()
    job = client.submit_file(JFK)
    assert time.monotonic() - started < 0.05  # submitting never waits for the engine
    wait_for(job.finished)
    timer.stop()
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert len(ticks) > 10 and max(gaps) < 0.25


def test_a_dictation_goes_ahead_of_queued_files(client):
    pcm, _ = soundfile.read(JFK, dtype="float32")
    seen = Signals()
    first = seen.watch(client.submit_file(JFK))
    wait_for(first.started)
    second = seen.watch(client.submit_file(JFK))
    dictation = seen.watch(client.submit_pcm(pcm[: 16000 * 3], priority=PRIORITY_DICTATION))
    wait_for(second.finished)
    assert seen.of("started") == [(first.id,), (dictation.id,), (second.id,)]


def test_cancelling_a_queued_file_is_immediate(client):
    seen = Signals()
    running = seen.watch(client.submit_file(JFK))
    wait_for(running.started)
    queued = seen.watch(client.submit_file(JFK))
    queued.cancel()
    assert seen.of("cancelled") == [(queued.id,)]  # before the running job has finished
    wait_for(running.finished)
    assert (queued.id,) not in seen.of("started")


@needs_clips("lecture-60s.wav")
def test_cancelling_a_running_file_stops_it(client):
    seen = Signals()
    job = seen.watch(client.submit_file(LECTURE))  # 60 s: two of Whisper's 30 s windows, cancelled between them
    wait_for(job.started)
    job.cancel()
    wait_for(job.cancelled)
    assert seen.of("finished") == []


def test_an_unreadable_file_fails_with_its_name(client, tmp_path):
    bad = tmp_path / "notes.wav"
    bad.write_text("this is not audio")
    job = client.submit_file(bad)
    (message,) = wait_for(job.failed)
    assert "notes.wav" in message


def test_live_preview_of_a_take(client):
    pcm, _ = soundfile.read(JFK, dtype="float32")
    previews = []
    client.preview.connect(previews.append)
    sink = client.begin_take(language="en")
    for start in range(0, 16000 * 2, 1600):  # 2 s of speech in 100 ms blocks, as the recorder feeds it
        sink(pcm[start : start + 1600])
    text, *_ = wait_for(client.preview, timeout_ms=60_000)
    client.end_take()
    assert "fellow" in words(text)  # "And so my fellow"
    count = len(previews)
    loop = QEventLoop()
    QTimer.singleShot(1500, loop.quit)
    loop.exec()
    assert len(previews) == count  # nothing after the take ended


def test_a_take_is_finished_by_its_stream_session(client):
    """The dictation job of a streamed take gives what transcribing the recording gives, including
    the blocks that reached the recording after the last ones streamed: the same segments and tokens
    (a piece closed at a pause while the take went on is heard as a piece of its own, so the tokens'
    probabilities may differ a little)."""
    pcm, _ = soundfile.read(JFK, dtype="float32")
    sink = client.begin_take(language="en", partials=False)
    for start in range(0, 16000 * 9, 1600):
        sink(pcm[start : start + 1600])
    loop = QEventLoop()
    QTimer.singleShot(500, loop.quit)  # the worker streams them meanwhile
    loop.exec()
    take = client.end_take()
    assert take is not None and client.end_take() is None
    job = client.submit_pcm(pcm, language="en", take=take)
    (transcript,) = wait_for(job.finished)
    offline = client.submit_pcm(pcm, language="en")
    (expected,) = wait_for(offline.finished)
    def heard(t):
        return [(s.start, s.end, s.text, [(token.id, token.start) for token in s.tokens]) for s in t.segments]

    assert heard(transcript) == heard(expected) and words(transcript.text) == JFK_WORDS


@needs_clips("commands/goforward.wav")
def test_hands_free_take_ends_when_the_speaker_pauses(client):
    pcm, _ = soundfile.read(AUDIO / "commands" / "goforward.wav", dtype="float32")
    sink = client.begin_take(language="en", partials=False)
    take = client.take_id
    for start in range(0, len(pcm), 1600):
        sink(pcm[start : start + 1600])
    for _ in range(12):
        sink(np.zeros(1600, np.float32))  # 1.2 s of quiet after "go forward ten meters"
    (ended,) = wait_for(client.speech_ended, timeout_ms=30_000)
    assert ended == take
    client.end_take()


def test_a_model_that_fails_to_load_fails_its_jobs(qapp, tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    engine = EngineClient()
    try:
        engine.load(str(broken), "cpu")
        (message,) = wait_for(engine.load_failed)
        assert "broken.gguf" in message and not engine.ready
        job = engine.submit_pcm(soundfile.read(JFK, dtype="float32")[0][:16000])
        (job_message,) = wait_for(job.failed)
        assert job_message == message
    finally:
        engine.shutdown()
