"""The dictation flow (``app.core.dictation_flow``) with stand-ins for the engine, the microphone and
delivery: a take goes recording, transcribing, ready, its text is delivered joined to the last one, and
the state changes only when it does."""

from types import SimpleNamespace

import numpy as np
import pytest
from PySide6.QtCore import QObject, Signal

from sayso.app.core import dictation_flow
from sayso.app.core.dictation import DictationState
from sayso.app.core.dictation_flow import DictationFlow
from sayso.app.core.history import History
from sayso.app.core.jobs import JobHandle
from sayso.app.core.settings import Settings
from sayso.app.platform.delivery import UNCONFIRMED_TYPED, DeliveryResult


class Engine(QObject):
    """Answers each take's job with ``text``."""

    loading, loaded, load_failed = Signal(str), Signal(str, str), Signal(str)
    preview, speech_ended = Signal(str), Signal(int)

    def __init__(self, text: str):
        super().__init__()
        self.text, self.ready, self.load_error, self.model_name, self.take_id = text, True, "", "tiny", 1
        self.jobs: list[JobHandle] = []

    def begin_take(self, **options):
        return lambda block: None

    def end_take(self):
        return object()

    def submit_pcm(self, pcm, **options) -> JobHandle:
        self.jobs.append(JobHandle(len(self.jobs) + 1, lambda: None))
        return self.jobs[-1]


class Microphone:
    is_open, device_name = True, "test"

    def start_take(self, sink=None):
        pass

    def stop_take(self):
        return np.zeros(16000, np.int16)


class Delivery(QObject):
    done = Signal(object)

    def __init__(self):
        super().__init__()
        self.texts: list[str] = []

    def capture_target(self):
        return "42"

    def deliver(self, text, target, method, app=None):
        self.texts.append(text)
        self.done.emit(DeliveryResult(True, "type", UNCONFIRMED_TYPED))  # keys sent, as xdotool's and wtype's are


@pytest.fixture
def flow(qtbot, tmp_path, monkeypatch):
    monkeypatch.setattr(dictation_flow, "MIN_TAKE_SECONDS", 0.0)
    history = History(tmp_path)
    flow = DictationFlow(Engine("Hello there."), Microphone(), Delivery(), history, SimpleNamespace(),
                         lambda: Settings(cues=False), lambda target: "editor", lambda window: False)
    flow.update_state()
    yield flow
    flow.stop()
    history.close()


def dictate(flow, qtbot):
    with qtbot.waitSignal(flow.history_changed, timeout=2000):
        flow.toggle()
        flow.toggle()
    with qtbot.waitSignal(flow.dictation_done, timeout=5000) as done:
        flow.client.jobs[-1].finished.emit(SimpleNamespace(text=flow.client.text, model="tiny"))
    return done.args


def test_a_take_goes_recording_transcribing_ready_and_its_text_is_delivered(flow, qtbot):
    states = []
    flow.state_changed.connect(states.append)
    assert flow.state is DictationState.READY
    text, result = dictate(flow, qtbot)
    assert states == [DictationState.RECORDING, DictationState.TRANSCRIBING, DictationState.READY]
    assert text == "Hello there." and result.delivered and flow.delivery.texts == ["Hello there."]
    dictate(flow, qtbot)
    assert flow.delivery.texts[1] == " Hello there."  # joined to what Sayso wrote there last
    (entry, _) = flow.history.search()
    assert entry.text == "Hello there." and entry.status == "done"
    assert entry.note == UNCONFIRMED_TYPED  # sent, not seen to arrive: the entry says so plainly


def test_a_failed_job_is_a_problem_and_the_flow_is_ready_again(flow, qtbot):
    with qtbot.waitSignal(flow.history_changed, timeout=2000):
        flow.toggle()
        flow.toggle()
    assert flow.state is DictationState.TRANSCRIBING
    with qtbot.waitSignal(flow.problem, timeout=1000) as problem:
        flow.client.jobs[-1].failed.emit("The model crashed.")
    assert problem.args == ["The model crashed."] and flow.state is DictationState.READY
    assert flow.history.search()[0].error == "The model crashed."


def test_the_state_follows_the_model(flow):
    flow.client.ready = False
    flow.client.loading.emit("Loading…")
    assert flow.state is DictationState.LOADING
    flow.client.load_error = "damaged"
    flow.client.load_failed.emit("damaged")
    assert flow.state is DictationState.ERROR
