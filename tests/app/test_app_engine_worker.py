"""The engine thread: the real Engine behind EngineClient, driven through its signals only."""

import os
import time

import numpy as np
import pytest
import soundfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop, QTimer  # noqa: E402

from sayso.app.core.engine_worker import PRIORITY_DICTATION, EngineClient  # noqa: E402

from conftest import AUDIO, JFK_WORDS, TINY_EN_GGUF, needs_clips, wait_for, words  # noqa: E402

MODEL = TINY_EN_GGUF
JFK = AUDIO / "jfk.wav"
LECTURE = AUDIO / "lecture-60s.wav"


class Signals:
    """Every signal of a client, in order, as (name, args)."""

    def __init__(self, client: EngineClient):
        self.events = []
        for name in ("started", "progress", "finished", "failed", "cancelled"):
            getattr(client, name).connect(lambda *args, n=name: self.events.append((n, args)))

    def of(self, name: str) -> list:
        return [args for n, args in self.events if n == name]


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
    seen = Signals(client)
    job = client.submit_pcm(pcm, language="en")
    _, transcript = wait_for(client.finished, condition=lambda j, t: j == job)
    assert words(transcript.text) == JFK_WORDS
    assert transcript.model
    assert seen.of("started") == [(job,)]
    fractions = [f for j, f in seen.of("progress") if j == job]
    assert fractions and fractions[-1] == 1.0 and fractions == sorted(fractions)


def test_the_gui_thread_keeps_running_while_the_engine_works(client):
    ticks = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(time.monotonic()))
    timer.start(10)
    started = time.monotonic()
    job = client.submit_file(JFK)
    assert time.monotonic() - started < 0.05  # submitting never waits for the engine
    wait_for(client.finished, condition=lambda j, t: j == job)
    timer.stop()
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert len(ticks) > 10 and max(gaps) < 0.25


def test_a_dictation_goes_ahead_of_queued_files(client):
    pcm, _ = soundfile.read(JFK, dtype="float32")
    seen = Signals(client)
    first = client.submit_file(JFK)
    wait_for(client.started, condition=lambda j: j == first)
    second = client.submit_file(JFK)
    dictation = client.submit_pcm(pcm[: 16000 * 3], priority=PRIORITY_DICTATION)
    wait_for(client.finished, condition=lambda j, t: j == second)
    assert [args[0] for args in seen.of("started")] == [first, dictation, second]


def test_cancelling_a_queued_file_is_immediate(client):
    seen = Signals(client)
    running = client.submit_file(JFK)
    wait_for(client.started, condition=lambda j: j == running)
    queued = client.submit_file(JFK)
    client.cancel(queued)
    assert seen.of("cancelled") == [(queued,)]  # before the running job has finished
    wait_for(client.finished, condition=lambda j, t: j == running)
    assert (queued,) not in seen.of("started")


@needs_clips("lecture-60s.wav")
def test_cancelling_a_running_file_stops_it(client):
    job = client.submit_file(LECTURE)  # 60 s: two of Whisper's 30 s windows, cancelled between them
    wait_for(client.started, condition=lambda j: j == job)
    client.cancel(job)
    seen = Signals(client)
    wait_for(client.cancelled, condition=lambda j: j == job)
    assert seen.of("finished") == []


def test_an_unreadable_file_fails_with_its_name(client, tmp_path):
    bad = tmp_path / "notes.wav"
    bad.write_text("this is not audio")
    job = client.submit_file(bad)
    _, message = wait_for(client.failed, condition=lambda j, m: j == job)
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
    the blocks that reached the recording after the last ones streamed."""
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
    _, transcript = wait_for(client.finished, condition=lambda j, t: j == job)
    offline = client.submit_pcm(pcm, language="en")
    _, expected = wait_for(client.finished, condition=lambda j, t: j == offline)
    assert transcript == expected and words(transcript.text) == JFK_WORDS


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
        _, job_message = wait_for(engine.failed, condition=lambda j, m: j == job)
        assert job_message == message
    finally:
        engine.shutdown()
