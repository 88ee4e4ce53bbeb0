"""The dictation flow: a take from the shortcut to the text in the focused window, and its state.

    key down  ─► capture the focused window, start the take (pre-roll included) streaming into the
                 engine, cue
    key up    ─► short tail, stop the take, save audio + History row, submit the take's job (its stream
                 session has done most of it by then)
    hands-free ─► a take started by a toggle stops by itself when the speaker pauses (VAD)
    text in   ─► the text rules and the optional cleanup (``TextWriter``, off this thread), History text,
                 then deliver to the window captured at key-down, one text after the other, joined to
                 what Sayso wrote there last; started from Sayso's own window, the text stays here

The flow holds no widget: its collaborators are handed in, and it tells the UI what to show through
signals. ``state`` follows ``dictation_state`` and changes only in ``update_state``, so ``state_changed``
is emitted once per change, whatever caused it. Everything runs on the GUI thread: the microphone, the
engine, the writer and delivery report back through Qt signals, so nothing here waits on a slow part.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from PySide6.QtCore import QObject, QTimer, Signal

from sayso.app.core.dictation import DictationState, FlowFacts, dictation_state
from sayso.app.core.engine_worker import EngineClient
from sayso.app.core.history import History
from sayso.app.core.profiles import DictationChoices, choices_for
from sayso.app.core.refusals import environment_error
from sayso.app.core.settings import Settings
from sayso.app.core.text.joining import join_to
from sayso.app.core.writer import TextWriter
from sayso.app.core.writing import LastWritten, Written, cleanup_for
from sayso.app.platform.cues import CuePlayer
from sayso.app.platform.delivery import Delivery, DeliveryResult
from sayso.app.platform.microphone import Microphone, MicrophoneError

log = logging.getLogger(__name__)

TAIL_MS = 150  # keep recording this long after the key comes up: people release while finishing a word
MIN_TAKE_SECONDS = 0.3  # shorter holds are accidental taps, not dictations


@dataclass
class Take:
    deliver: bool  # False when started from Sayso's own window: the text then stays here
    target: str | None  # the window that had the focus at key-down
    choices: DictationChoices  # Settings, with the focused app's profile over them
    started: float  # time.monotonic()
    stopping: bool = False
    released: float = 0.0  # time.monotonic() at key-up
    hands_free: bool = False  # stop when the speaker pauses
    stream: int | None = None  # the engine's id for the take's stream session


@dataclass
class Pending:
    entry_id: int | None
    deliver: bool
    target: str | None
    released: float  # time.monotonic() at key-up, for the latency log
    duration: float
    choices: DictationChoices
    model: str = ""  # the model that transcribed it, once it has


class DictationFlow(QObject):
    """Runs takes through the engine, the writer and delivery; ``state`` says where the flow is."""

    state_changed = Signal(object)  # DictationState
    microphone_changed = Signal()  # opened or failed: its name or ``microphone_error`` changed
    recording = Signal(str)  # a take started; the focused app whose profile it follows
    transcribing = Signal(str)  # a take ended; what the overlay says while its text is made
    preview = Signal(str)  # the take's text so far
    message = Signal(str, str)  # a short message: text, kind (info | warn | error)
    problem = Signal(str)  # an error the user must see
    notice = Signal(str)  # a lasting note for the Dictation page
    history_changed = Signal()  # a History entry was added or finished
    recent_changed = Signal()  # the latest dictations changed without a delivery
    dictation_done = Signal(str, object)  # text, DeliveryResult (or None when nothing was delivered)

    def __init__(self, client: EngineClient, microphone: Microphone, delivery: Delivery, history: History,
                 cues: CuePlayer, settings: Callable[[], Settings], focused_app: Callable[[str | None], str],
                 is_own_window: Callable[[str], bool], parent: QObject | None = None):
        super().__init__(parent)
        self.client, self.microphone, self.delivery, self.history, self.cues = (
            client, microphone, delivery, history, cues)
        self._settings = settings
        self._focused_app = focused_app
        self._is_own_window = is_own_window
        self.writer = TextWriter(self)
        self.last_written = LastWritten()
        self._take: Take | None = None
        self._pending: dict[int, Pending] = {}  # by engine job id, until the engine's text is in
        self._writing: dict[int, Pending] = {}  # by engine job id, until the text rules and cleanup are done
        self._deliveries: deque[tuple[str, Pending]] = deque()
        self._delivering: tuple[str, Pending] | None = None
        self._microphone_error = ""
        self._state: DictationState | None = None  # None until the first ``update_state``
        self._stopped = False

        client.loading.connect(self.update_state)
        client.loaded.connect(self.update_state)
        client.load_failed.connect(self.update_state)
        client.preview.connect(self._on_preview)
        client.speech_ended.connect(self._on_speech_ended)
        delivery.done.connect(self._on_delivered)
        self.writer.written.connect(self._on_written)

    # ---- state --------------------------------------------------------------------------------------

    @property
    def state(self) -> DictationState | None:
        return self._state

    @property
    def take_under_way(self) -> bool:
        """From key-down to the end of the tail: the microphone must not be reopened meanwhile."""
        return self._take is not None

    @property
    def microphone_error(self) -> str:
        return self._microphone_error

    def update_state(self) -> None:
        """Derive the state from the flow and its parts; the one place it changes."""
        take = self._take
        state = dictation_state(FlowFacts(
            recording=take is not None and not take.stopping,
            finishing=bool(self._pending or self._writing) or (take is not None and take.stopping),
            model_ready=self.client.ready, load_error=self.client.load_error or "",
            microphone_error=self._microphone_error))
        if state != self._state:
            self._state = state
            self.state_changed.emit(state)

    def open_microphone(self) -> bool:
        try:
            name = self.microphone.open(self._settings().input_device)
        except MicrophoneError as error:
            self._microphone_error = str(error)
            log.warning("microphone: %s", error)
        else:
            self._microphone_error = ""
            log.info("microphone: %s", name)
        self.update_state()
        self.microphone_changed.emit()
        return not self._microphone_error

    def stop(self) -> None:
        """At shutdown: texts written after this are dropped (the History is closing; the entry stays
        interrupted, for the History page to offer again)."""
        self._stopped = True
        self.writer.stop()

    # ---- the shortcut -------------------------------------------------------------------------------

    def key_pressed(self) -> None:
        if self._settings().mode == "toggle":
            self.toggle()
        elif self._take is None:
            self.start_dictation()

    def key_released(self) -> None:
        if self._settings().mode == "hold":
            self.stop_dictation()

    def toggle(self, deliver: bool = True) -> None:
        if self._take is None:
            self.start_dictation(deliver, hands_free=self._settings().hands_free)
        else:
            self.stop_dictation()

    # ---- the take -----------------------------------------------------------------------------------

    def start_dictation(self, deliver: bool = True, hands_free: bool = False) -> bool:
        """Start a take now; False (and a ``problem``) if the microphone can't be used.

        ``deliver``: type or paste the text into the window focused now; otherwise keep it in Sayso.
        ``hands_free``: stop by itself when the speaker pauses after speaking.
        """
        if self._take is not None:
            return False
        if not self.microphone.is_open and not self.open_microphone():
            self.problem.emit(self._microphone_error)
            return False
        settings = self._settings()
        target = self.delivery.capture_target() if deliver else None
        choices = choices_for(settings, self._focused_app(target) if deliver else "")
        sink = None
        # Streamed even without live text, so the engine works ahead of the key-up; not where a profile
        # asks for another model than the loaded one, which the engine loads for the finished take.
        if self.client.ready and choices.model is None:
            sink = self.client.begin_take(language=choices.language, prompt=settings.prompt,
                                          partials=settings.live_preview)
        self.microphone.start_take(sink)
        self._take = Take(deliver, target, choices, time.monotonic(), hands_free=hands_free,
                          stream=self.client.take_id if sink else None)
        if settings.cues:
            self.cues.play("start")
        self.recording.emit(choices.app)
        self.update_state()
        log.info("recording (target window %s, app %r%s)", target, choices.app,
                 ", its profile" if choices.profile else "")
        return True

    def stop_dictation(self) -> None:
        """End the take after a short tail; its job is submitted when the tail is in."""
        if self._take is None or self._take.stopping:
            return
        self._take.stopping = True
        self._take.released = time.monotonic()
        self.transcribing.emit("Transcribing…")
        self.update_state()
        QTimer.singleShot(TAIL_MS, self._finish_take)

    def _finish_take(self) -> None:
        take, self._take = self._take, None
        settings = self._settings()
        pcm = self.microphone.stop_take()
        stream = self.client.end_take() if take.stream is not None else None
        if settings.cues:
            self.cues.play("stop")
        if take.released - take.started < MIN_TAKE_SECONDS:
            self.update_state()
            self.message.emit("Hold the shortcut while you speak", "info")
            return
        entry_id = None
        try:
            entry_id = self.history.add(pcm, self.client.model_name).id
        except Exception as error:  # a full disk must not cost the user their dictation: transcribe anyway
            reason = environment_error(error) if isinstance(error, OSError) else str(error)
            log.error("history: can't save the recording: %s", reason)
            self.notice.emit(f"This dictation couldn't be saved to History: {reason} "
                             "Its text is delivered all the same.")
        job = self.client.submit_pcm(pcm, language=take.choices.language, prompt=settings.prompt,
                                     model=take.choices.model, take=stream)
        self._pending[job.id] = Pending(entry_id, take.deliver, take.target, take.released, len(pcm) / 16000,
                                        take.choices)
        job.finished.connect(partial(self._on_finished, job.id))
        job.failed.connect(partial(self._on_failed, job.id))
        job.cancelled.connect(partial(self._on_failed, job.id, "Cancelled."))
        self.transcribing.emit("Transcribing…" if self.client.ready else "Waiting for the model…")
        self.history_changed.emit()
        self.update_state()

    def _on_preview(self, text: str) -> None:
        if self._take is not None:
            self.preview.emit(text)

    def _on_speech_ended(self, stream: int) -> None:
        if self._take is not None and self._take.hands_free and self._take.stream == stream:
            log.info("hands-free: the speaker paused; stopping")
            self.stop_dictation()

    # ---- the text -----------------------------------------------------------------------------------

    def _on_finished(self, job_id: int, transcript) -> None:
        pending = self._pending.pop(job_id)
        log.info(
            "transcribed %.1f s in %.0f ms after key-up", pending.duration, 1000 * (time.monotonic() - pending.released)
        )
        pending.model = transcript.model
        self._writing[job_id] = pending
        self.writer.write(job_id, transcript.text.strip(), pending.choices.rules, cleanup_for(self._settings()))

    def _on_failed(self, job_id: int, message: str) -> None:
        pending = self._pending.pop(job_id)
        if pending.entry_id is not None:
            self.history.fail(pending.entry_id, message)
            self.history_changed.emit()
        self.problem.emit(message)
        self.recent_changed.emit()
        self.update_state()

    def _on_written(self, written: Written) -> None:
        pending = self._writing.pop(written.key, None)
        if pending is None or self._stopped:
            return
        text = written.text
        if pending.entry_id is not None:
            self.history.finish(pending.entry_id, text, pending.model, raw_text=written.raw, note=written.note)
            self.history_changed.emit()
        if written.note:
            self.notice.emit(written.note)
        if not text:
            self.message.emit("No speech heard" if not written.raw else "Nothing left to write", "info")
            self.update_state()
            self.dictation_done.emit("", None)
            return
        if not pending.deliver or (pending.target is not None and self._is_own_window(pending.target)):
            self.update_state()
            self.dictation_done.emit(text, None)
            return
        self._deliveries.append((text, pending))
        self._deliver_next()
        self.update_state()

    # ---- delivery -----------------------------------------------------------------------------------

    def _deliver_next(self) -> None:
        """One delivery at a time, in the order the dictations were made, each joined to the one before."""
        if self._delivering is not None or not self._deliveries:
            return
        self._delivering = self._deliveries.popleft()
        text, pending = self._delivering
        previous = self.last_written.previous(pending.target)
        self.delivery.deliver(join_to(previous, text), pending.target, pending.choices.delivery, pending.choices.app)

    def _on_delivered(self, result: DeliveryResult) -> None:
        text, pending = self._delivering
        self._delivering = None
        if result.delivered:
            self.last_written.remember(pending.target, text)
            # "delivered" only where the text was seen to arrive; keys that were only sent say so
            log.info("%s %d characters by %s, %.0f ms after key-up", "delivered" if result.confirmed else "sent",
                     len(text), result.method, 1000 * (time.monotonic() - pending.released))
            if not result.confirmed and pending.entry_id is not None:
                self.history.note(pending.entry_id, result.message)
                self.history_changed.emit()
        self.dictation_done.emit(text, result)
        self._deliver_next()
        self.update_state()
