"""The coordinator: owns every part of the app and runs the dictation flow between them.

    shortcut down ─► capture the focused window, start the take (pre-roll included) streaming into the
                     engine (text so far on the overlay), cue, overlay
    shortcut up   ─► short tail, stop the take, save audio + history row, queue the transcription (the
                     take's stream session has done most of it by then)
    hands-free    ─► a take started by a toggle stops by itself when the speaker pauses (VAD)
    transcript    ─► the text rules and the optional cleanup (``app.core.writing``, off this thread),
                     history text, then deliver to the window captured at key-down (if it still has
                     the focus; otherwise keep the text here and say so), joined to what Sayso wrote
                     there last
The focused app at key-down picks the dictation's profile (``app.core.profiles``): its model, language,
delivery and commands.

The parts know nothing of each other: the microphone (PortAudio thread), the engine (its QThread), the
hotkey listener (pynput thread) and delivery (subprocesses) all report back through Qt signals, so
every step here runs on the GUI thread and nothing here waits on a slow part.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QApplication

from sayso.app.platform.autostart import set_start_at_login, starts_at_login
from sayso.app.platform.cues import CuePlayer
from sayso.app.platform.delivery import Delivery, DeliveryResult
from sayso.app.platform.focus import focused_app
from sayso.app.ui.dictation_page import DictationPage
from sayso.app.core.dictation import DictationState, FlowFacts, dictation_state
from sayso.app.core.engine_worker import EngineClient, EngineFactory
from sayso.app.ui.files_view import FilesPage
from sayso.app.core.history import History
from sayso.app.core.text.joining import join_to
from sayso.app.core.profiles import DictationChoices, choices_for
from sayso.app.core.writer import TextWriter
from sayso.app.core.writing import LastWritten, Written, cleanup_for
from sayso.app.ui.history_view import HistoryPage, entry_meta
from sayso.app.platform.hotkeys import HotkeyListener, display_server, format_hotkey
from sayso.app.platform.locations import settings_file
from sayso.app.ui.main_window import MainWindow
from sayso.app.ui.overlay import Overlay, can_float
from sayso.app.platform.microphone import Microphone, MicrophoneError, rescan_devices
from sayso.app.core.refusals import environment_error
from sayso.app.core.settings import Settings, SettingsStore
from sayso.app.ui.settings_view import SettingsPage
from sayso.app.ui.tray import Tray

log = logging.getLogger(__name__)

TAIL_MS = 150  # keep recording this long after the key comes up: people release while finishing a word
MIN_TAKE_SECONDS = 0.3  # shorter holds are accidental taps, not dictations
LEVEL_POLL_MS = 33
RECENT_SHOWN = 4  # dictations listed on the Dictation page


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


class Coordinator(QObject):
    state_changed = Signal(str)  # loading | ready | recording | transcribing | error
    dictation_done = Signal(str, object)  # text, DeliveryResult (or None when nothing was delivered)

    def __init__(self, data_dir: Path, engine_factory: EngineFactory | None = None):
        super().__init__()
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.store = SettingsStore(settings_file(self.data_dir))
        # The autostart entry is the truth about starting at login: the desktop's own settings may remove it.
        self.settings = self.store.load().with_changes(start_at_login=starts_at_login())
        self.history = History(self.data_dir)
        self.client = EngineClient(engine_factory, self)
        self.microphone = Microphone()
        self.hotkeys = HotkeyListener(self)
        self.delivery = Delivery(self)
        self.writer = TextWriter(self)
        self.last_written = LastWritten()
        self.cues = CuePlayer()
        self.overlay = Overlay()

        self.dictation_page = DictationPage()
        self.files_page = FilesPage(self.client, lambda: self.settings)
        self.history_page = HistoryPage(self.history, self.client, lambda: self.settings)
        self.settings_page = SettingsPage(self.settings, self.data_dir)
        self.window = MainWindow(
            {
                "dictation": self.dictation_page,
                "files": self.files_page,
                "history": self.history_page,
                "settings": self.settings_page,
            }
        )
        self.tray = Tray(self)

        self._take: Take | None = None
        self._pending: dict[int, Pending] = {}  # by engine job id, until the engine's text is in
        self._writing: dict[int, Pending] = {}  # by engine job id, until the text rules and cleanup are done
        self._deliveries: deque[tuple[str, Pending]] = deque()
        self._delivering: tuple[str, Pending] | None = None
        self._mic_error = ""
        self._loading_text = "Loading model…"
        self._announced_ready = False
        self._told_about_tray = False
        self._state: DictationState | None = None
        self._shut_down = False

        self._level_timer = QTimer(self)
        self._level_timer.setInterval(LEVEL_POLL_MS)
        self._level_timer.timeout.connect(self._poll_level)

        self.client.loading.connect(self._on_loading)
        self.client.loaded.connect(self._on_loaded)
        self.client.load_failed.connect(self._on_load_failed)
        self.client.preview.connect(self._on_preview)
        self.client.speech_ended.connect(self._on_speech_ended)
        self.client.warning.connect(self._on_engine_warning)
        self.hotkeys.pressed.connect(self._on_hotkey_pressed)
        self.hotkeys.released.connect(self._on_hotkey_released)
        self.hotkeys.failed.connect(self.dictation_page.notice.show_text)
        self.delivery.done.connect(self._on_delivered)
        self.writer.written.connect(self._on_written)
        self.dictation_page.record_clicked.connect(lambda: self.toggle(deliver=False))
        self.settings_page.changed.connect(self.apply_settings)
        self.settings_page.rescan_requested.connect(self.rescan_microphones)
        self.history_page.entry_changed.connect(lambda _: self._show_last_dictation())
        self.window.files_dropped.connect(self.files_page.add_files)
        self.window.close_requested.connect(self._on_close_requested)
        self.tray.show_window.connect(self.show_window)
        self.tray.toggle_recording.connect(self.toggle)
        self.tray.quit.connect(self.quit)
        self._show_last_dictation()

    # ---- start and stop -----------------------------------------------------------------------------

    def start(self, *, hotkeys: bool = True, microphone: bool = True) -> None:
        """Load the model (engine thread), open the microphone and watch the shortcut."""
        self.client.load(self.settings.model, self.settings.device)
        if microphone:
            self._open_microphone()
        if hotkeys:
            self._watch_hotkey()
        self._update_hint()
        self._refresh_state()

    def open_files(self, paths: list[str]) -> None:
        """Files the desktop opened with Sayso (``sayso FILE...``): transcribed on the Files page."""
        self.show_window()
        self.window.show_page("files")
        self.files_page.add_files([Path(p) for p in paths])

    def show_window(self) -> None:
        self.window.showNormal()
        self.window.raise_()
        self.window.activateWindow()

    def quit(self) -> None:
        self.window.quitting = True  # else, with a tray, the open window would hide itself and stop the quit
        self.window.hide()  # first: Qt's Wayland backend crashed painting it while the rest shut down
        self.shutdown()
        QApplication.quit()

    def shutdown(self) -> None:
        """Stop every part; safe to call twice."""
        if self._shut_down:
            return
        self._shut_down = True
        self._level_timer.stop()
        self.hotkeys.stop()
        self.microphone.close()
        self.client.shutdown()
        self.writer.stop()
        self.history_page.stop()
        self.history.close()
        self.tray.hide()
        self.overlay.close()

    def _on_close_requested(self) -> None:
        if not self.tray.available:
            self.quit()
            return
        self.window.hide()
        if not self._told_about_tray:
            self._told_about_tray = True
            self.tray.notify("Sayso is still running", "Dictate with your shortcut; open Sayso from the tray icon.")

    # ---- settings -----------------------------------------------------------------------------------

    def apply_settings(self, new: Settings) -> None:
        old, self.settings = self.settings, new
        self.store.save(new)
        if (new.model, new.device) != (old.model, old.device):
            self.client.load(new.model, new.device)
        if new.input_device != old.input_device and self._take is None:
            self._open_microphone()
        if new.start_at_login != old.start_at_login:
            try:
                set_start_at_login(new.start_at_login)
            except OSError as error:
                self.settings = new = new.with_changes(start_at_login=starts_at_login())
                self.dictation_page.notice.show_text(f"Starting at login couldn't be changed: {error.strerror}.")
        if new.hotkey != old.hotkey and (self.hotkeys.running or new.hotkey):
            self._watch_hotkey()
        if self.settings_page.current() != new:
            self.settings_page.load(new)
        self._update_hint()
        self._refresh_state()

    def _open_microphone(self) -> bool:
        try:
            name = self.microphone.open(self.settings.input_device)
        except MicrophoneError as error:
            self._mic_error = str(error)
            log.warning("microphone: %s", error)
            self._refresh_state()
            return False
        self._mic_error = ""
        log.info("microphone: %s", name)
        self._refresh_state()
        return True

    def rescan_microphones(self) -> None:
        """Find microphones plugged in since the start (PortAudio must restart, so the stream reopens)."""
        if self._take is not None:
            return
        self.microphone.close()
        try:
            rescan_devices()
        except MicrophoneError as error:
            log.warning("microphone: %s", error)
        self._open_microphone()
        self.settings_page.show_microphones()

    def _watch_hotkey(self) -> None:
        try:
            self.hotkeys.start(self.settings.hotkey)
        except (ValueError, RuntimeError) as error:
            self.dictation_page.notice.show_text(str(error))
            log.warning("hotkeys: %s", error)
        else:
            self.dictation_page.notice.hide()

    def _update_hint(self) -> None:
        keys = format_hotkey(self.settings.hotkey)
        if display_server() == "wayland" and not self.hotkeys.running:
            hint = "Bind “sayso --toggle” to a keyboard shortcut in your desktop's settings, or use the button."
        elif self.settings.mode == "hold":
            hint = f"Hold {keys} anywhere and speak; let go to insert the text."
        elif self.settings.hands_free:
            hint = f"Press {keys} anywhere and speak; the text goes in when you pause."
        else:
            hint = f"Press {keys} anywhere to start dictating, and again to insert the text."
        self.dictation_page.set_hint(hint)

    # ---- state --------------------------------------------------------------------------------------

    @property
    def state(self) -> DictationState:
        return self._state

    def _refresh_state(self) -> None:
        take = self._take
        state = dictation_state(FlowFacts(
            recording=take is not None and not take.stopping,
            finishing=bool(self._pending or self._writing) or (take is not None and take.stopping),
            model_ready=self.client.ready, load_error=self.client.load_error or "",
            microphone_error=self._mic_error or ""))
        detail = {
            DictationState.RECORDING: lambda: f"Microphone: {self.microphone.device_name}",
            DictationState.TRANSCRIBING: lambda: self.client.description or self._loading_text,
            DictationState.ERROR: lambda: self.client.load_error or self._mic_error,
            DictationState.LOADING: lambda: self._loading_text,
            DictationState.READY: lambda: f"{self.client.description} · Microphone: "
                                          f"{self.microphone.device_name or 'none'}",
        }[state]()
        self.dictation_page.set_state(state.value, detail)
        tray_state = {"recording": "recording", "transcribing": "transcribing"}.get(state.value, "idle")
        self.tray.set_state(tray_state, self.dictation_page.state.text())
        if state != self._state:
            self._state = state
            self.state_changed.emit(state.value)
        if state is DictationState.READY and not self._announced_ready and self.microphone.is_open:
            self._announced_ready = True
            log.info(
                "Sayso is ready: %s; microphone %s; shortcut %s (%s)",
                self.client.description, self.microphone.device_name, format_hotkey(self.settings.hotkey), self.settings.mode,
            )  # fmt: skip

    def _on_loading(self, text: str) -> None:
        self._loading_text = text
        self.window.set_engine_status("loading", "Loading model", text)
        self._refresh_state()

    def _on_loaded(self, name: str, description: str) -> None:
        self.window.set_engine_status("ready", name, description)
        self._refresh_state()

    def _on_load_failed(self, message: str) -> None:
        self.window.set_engine_status("error", "No model", "See the Dictation page")
        self._refresh_state()

    # ---- dictation ----------------------------------------------------------------------------------

    def toggle(self, deliver: bool = True) -> None:
        if self._take is None:
            self.start_dictation(deliver, hands_free=self.settings.hands_free)
        else:
            self.stop_dictation()

    def _on_hotkey_pressed(self) -> None:
        if self.settings.mode == "toggle":
            self.toggle()
        elif self._take is None:
            self.start_dictation()

    def _on_hotkey_released(self) -> None:
        if self.settings.mode == "hold":
            self.stop_dictation()

    def start_dictation(self, deliver: bool = True, hands_free: bool = False) -> bool:
        """Start a take now; False (and a message) if the microphone can't be used.

        ``deliver``: type or paste the text into the window focused now; otherwise keep it in Sayso.
        ``hands_free``: stop by itself when the speaker pauses after speaking.
        """
        if self._take is not None:
            return False
        if not self.microphone.is_open and not self._open_microphone():
            self._show_problem(self._mic_error)
            return False
        target = self.delivery.capture_target() if deliver else None
        choices = choices_for(self.settings, focused_app(target) if deliver else "")
        self.settings_page.profiles.show_last_app(choices.app)
        sink = None
        # Streamed even without live text, so the engine works ahead of the key-up; not where a profile
        # asks for another model than the loaded one, which the engine loads for the finished take.
        if self.client.ready and choices.model is None:
            sink = self.client.begin_take(language=choices.language, prompt=self.settings.prompt,
                                          partials=self.settings.live_preview)
        self.microphone.start_take(sink)
        self._take = Take(deliver, target, choices, time.monotonic(), hands_free=hands_free,
                          stream=self.client.take_id if sink else None)
        if self.settings.cues:
            self.cues.play("start")
        if self._overlay_shown:
            self.overlay.show_recording()
        self._level_timer.start()
        self._refresh_state()
        log.info("recording (target window %s, app %r%s)", target, choices.app,
                 ", its profile" if choices.profile else "")
        return True

    def stop_dictation(self) -> None:
        """End the take after a short tail; the transcription is queued when the tail is in."""
        if self._take is None or self._take.stopping:
            return
        self._take.stopping = True
        self._take.released = time.monotonic()
        if self._overlay_shown:
            self.overlay.show_transcribing()
        self._refresh_state()
        QTimer.singleShot(TAIL_MS, self._finish_take)

    def _finish_take(self) -> None:
        take, self._take = self._take, None
        pcm = self.microphone.stop_take()
        stream = self.client.end_take() if take.stream is not None else None
        self._level_timer.stop()
        if self.settings.cues:
            self.cues.play("stop")
        held = take.released - take.started
        if held < MIN_TAKE_SECONDS:
            self._refresh_state()
            self._show_message("Hold the shortcut while you speak", "info")
            return
        entry_id = None
        try:
            entry_id = self.history.add(pcm, self.client.model_name).id
        except Exception as error:  # a full disk must not cost the user their dictation: transcribe anyway
            reason = environment_error(error) if isinstance(error, OSError) else str(error)
            log.error("history: can't save the recording: %s", reason)
            self.dictation_page.notice.show_text(f"This dictation couldn't be saved to History: {reason} "
                                                 "Its text is delivered all the same.")
        job = self.client.submit_pcm(pcm, language=take.choices.language, prompt=self.settings.prompt,
                                     model=take.choices.model, take=stream)
        self._pending[job.id] = Pending(entry_id, take.deliver, take.target, take.released, len(pcm) / 16000,
                                        take.choices)
        job.finished.connect(partial(self._on_finished, job.id))
        job.failed.connect(partial(self._on_failed, job.id))
        job.cancelled.connect(partial(self._on_failed, job.id, "Cancelled."))
        if self._overlay_shown:
            self.overlay.show_transcribing("Transcribing…" if self.client.ready else "Waiting for the model…")
        self.history_page.refresh()
        self._refresh_state()

    def _poll_level(self) -> None:
        level = self.microphone.level
        self.dictation_page.set_level(level)
        self.overlay.set_level(level)

    def _on_preview(self, text: str) -> None:
        if self._take is not None and self._overlay_shown:
            self.overlay.set_text(text)

    def _on_speech_ended(self, stream: int) -> None:
        if self._take is not None and self._take.hands_free and self._take.stream == stream:
            log.info("hands-free: the speaker paused; stopping")
            self.stop_dictation()

    def _on_finished(self, job_id: int, transcript) -> None:
        pending = self._pending.pop(job_id)
        log.info(
            "transcribed %.1f s in %.0f ms after key-up", pending.duration, 1000 * (time.monotonic() - pending.released)
        )
        pending.model = transcript.model
        self._writing[job_id] = pending
        self.writer.write(job_id, transcript.text.strip(), pending.choices.rules, cleanup_for(self.settings))

    def _on_written(self, written: Written) -> None:
        pending = self._writing.pop(written.key, None)
        if pending is None or self._shut_down:  # shut down: the History is closed, the entry is interrupted
            return
        text = written.text
        if pending.entry_id is not None:
            self.history.finish(pending.entry_id, text, pending.model, raw_text=written.raw, note=written.note)
            self.history_page.refresh()
        if written.note:
            self.dictation_page.notice.show_text(written.note)
        if not text:
            self._show_message("No speech heard" if not written.raw else "Nothing left to write", "info")
            self._refresh_state()
            self.dictation_done.emit("", None)
            return
        if not pending.deliver or (pending.target is not None and self._is_own_window(pending.target)):
            self._show_last_dictation()
            self.overlay.hide()
            self._refresh_state()
            self.dictation_done.emit(text, None)
            return
        self._deliveries.append((text, pending))
        self._deliver_next()
        self._refresh_state()

    def _on_failed(self, job_id: int, message: str) -> None:
        pending = self._pending.pop(job_id)
        if pending.entry_id is not None:
            self.history.fail(pending.entry_id, message)
            self.history_page.refresh()
        self._show_problem(message)
        self._show_last_dictation()
        self._refresh_state()

    def _deliver_next(self) -> None:
        if self._delivering is not None or not self._deliveries:
            return
        self._delivering = self._deliveries.popleft()
        text, pending = self._delivering
        previous = self.last_written.previous(pending.target)
        self.delivery.deliver(join_to(previous, text), pending.target, pending.choices.delivery)

    def _on_delivered(self, result: DeliveryResult) -> None:
        text, pending = self._delivering
        self._delivering = None
        elapsed = 1000 * (time.monotonic() - pending.released)
        if result.delivered:
            self.last_written.remember(pending.target, text)
            log.info("delivered %d characters by %s, %.0f ms after key-up", len(text), result.method, elapsed)
            self._show_last_dictation()
            if self._overlay_shown:
                self.overlay.show_message("Inserted", "ok", 900)
        else:
            self._show_last_dictation(kept=result.message)
            self._show_message("Text kept in Sayso: " + result.message, "warn")
            self.tray.notify("Dictation kept in Sayso", result.message)
        self.dictation_done.emit(text, result)
        self._deliver_next()
        self._refresh_state()

    def _is_own_window(self, window: str) -> bool:
        try:
            wid = int(window)
        except ValueError:
            return False
        return any(int(w.winId()) == wid for w in QApplication.topLevelWidgets() if w.isVisible())

    def _show_last_dictation(self, kept: str = "") -> None:
        entries = self.history.search(limit=RECENT_SHOWN)
        items = [(e.text if e.status == "done" else "", entry_meta(e)) for e in entries]
        self.dictation_page.show_recent(items, kept or (entries[0].error if entries else ""))

    @property
    def _overlay_shown(self) -> bool:
        return self.settings.overlay and can_float()

    def _show_message(self, message: str, kind: str) -> None:
        """A short message: on the overlay, or, where it can't be shown, on the main window."""
        if self._overlay_shown:
            self.overlay.show_message(message, kind)
        elif not can_float():  # Wayland: the user would otherwise never see it
            self.dictation_page.notice.show_text(message)

    def _on_engine_warning(self, message: str) -> None:
        """The engine hit a problem it worked around (the GPU failed: it moved to the CPU)."""
        self.tray.notify("Sayso", message)
        self.dictation_page.notice.show_text(message)

    def _show_problem(self, message: str) -> None:
        """An error the user must see even without the overlay: overlay, tray notification, page notice."""
        self._show_message(message, "error")
        self.tray.notify("Sayso", message)
        self.dictation_page.notice.show_text(message)
