"""The coordinator: builds every part of the app and the pages, and wires them together.

The dictation flow itself (the take, the engine's jobs, the writing, delivery, and the state they add up
to) is ``app.core.dictation_flow``; this module hands it its parts and shows what it reports: on the
overlay, the tray and the pages. The focused app at key-down picks the dictation's profile
(``app.core.profiles``): its model, language, delivery and commands.

The parts know nothing of each other: the microphone (PortAudio thread), the engine (its QThread), the
hotkey listener (pynput thread) and delivery (subprocesses) all report back through Qt signals, so
every step here runs on the GUI thread and nothing here waits on a slow part.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication

from sayso.app.platform.autostart import set_start_at_login, starts_at_login
from sayso.app.platform.cues import CuePlayer
from sayso.app.platform.delivery import UNFETCHED_PASTE, Delivery, DeliveryResult
from sayso.app.platform.focus import focused_app
from sayso.app.ui.dictation_page import DictationPage
from sayso.app.core.dictation import DictationState
from sayso.app.core.dictation_flow import DictationFlow
from sayso.app.core.engine_worker import EngineClient, EngineFactory
from sayso.app.ui.files_view import FilesPage
from sayso.app.core.history import History
from sayso.app.ui.history_view import HistoryPage, entry_meta
from sayso.app.platform.hotkeys import HotkeyListener, display_server, format_hotkey
from sayso.app.platform.locations import settings_file
from sayso.app.ui.main_window import MainWindow
from sayso.app.ui.overlay import Overlay, can_float
from sayso.app.platform.microphone import Microphone, MicrophoneError, rescan_devices
from sayso.app.core.settings import Settings, SettingsStore
from sayso.app.ui.settings_view import SettingsPage
from sayso.app.ui.tray import Tray

log = logging.getLogger(__name__)

LEVEL_POLL_MS = 33
RECENT_SHOWN = 4  # dictations listed on the Dictation page


class Coordinator(QObject):
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
        self.cues = CuePlayer()
        self.flow = DictationFlow(self.client, self.microphone, self.delivery, self.history, self.cues,
                                  lambda: self.settings, focused_app, self._is_own_window, self)
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

        self._loading_text = "Loading model…"
        self._announced_ready = False
        self._told_about_tray = False
        self._shut_down = False

        self._level_timer = QTimer(self)
        self._level_timer.setInterval(LEVEL_POLL_MS)
        self._level_timer.timeout.connect(self._poll_level)

        self.client.loading.connect(self._on_loading)
        self.client.loaded.connect(self._on_loaded)
        self.client.load_failed.connect(self._on_load_failed)
        self.client.warning.connect(self._on_engine_warning)
        self.flow.state_changed.connect(self._on_state_changed)
        self.flow.microphone_changed.connect(self._show_state)
        self.flow.recording.connect(self._on_recording)
        self.flow.transcribing.connect(self._on_transcribing)
        self.flow.preview.connect(self._on_preview)
        self.flow.message.connect(self._show_message)
        self.flow.problem.connect(self._show_problem)
        self.flow.notice.connect(self.dictation_page.notice.show_text)
        self.flow.history_changed.connect(self.history_page.refresh)
        self.flow.recent_changed.connect(self._show_last_dictation)
        self.flow.dictation_done.connect(self._on_dictation_done)
        self.hotkeys.pressed.connect(self.flow.key_pressed)
        self.hotkeys.released.connect(self.flow.key_released)
        self.hotkeys.failed.connect(self.dictation_page.notice.show_text)
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
            self.flow.open_microphone()
        if hotkeys:
            self._watch_hotkey()
        self._update_hint()
        self.flow.update_state()
        self._show_state()

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
        self.flow.stop()
        self.delivery.close()
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
        if new.input_device != old.input_device and not self.flow.take_under_way:
            self.flow.open_microphone()
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
        self.flow.update_state()
        self._show_state()

    def rescan_microphones(self) -> None:
        """Find microphones plugged in since the start (PortAudio must restart, so the stream reopens)."""
        if self.flow.take_under_way:
            return
        self.microphone.close()
        try:
            rescan_devices()
        except MicrophoneError as error:
            log.warning("microphone: %s", error)
        self.flow.open_microphone()
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
    def state(self) -> DictationState | None:
        return self.flow.state

    def _on_state_changed(self, state: DictationState) -> None:
        if state is not DictationState.RECORDING:
            self._level_timer.stop()
        self._show_state()

    def _show_state(self) -> None:
        """The flow's state, with what explains it, on the Dictation page and the tray; logged once ready."""
        state = self.flow.state
        if state is None:  # not started yet
            return
        detail = {
            DictationState.RECORDING: lambda: f"Microphone: {self.microphone.device_name}",
            DictationState.TRANSCRIBING: lambda: self.client.description or self._loading_text,
            DictationState.ERROR: lambda: self.client.load_error or self.flow.microphone_error,
            DictationState.LOADING: lambda: self._loading_text,
            DictationState.READY: lambda: f"{self.client.description} · Microphone: "
                                          f"{self.microphone.device_name or 'none'}",
        }[state]()
        self.dictation_page.set_state(state.value, detail)
        tray_state = {"recording": "recording", "transcribing": "transcribing"}.get(state.value, "idle")
        self.tray.set_state(tray_state, self.dictation_page.state.text())
        if state is DictationState.READY and not self._announced_ready and self.microphone.is_open:
            self._announced_ready = True
            log.info("Sayso is ready: %s; microphone %s; shortcut %s (%s)", self.client.description,
                     self.microphone.device_name, format_hotkey(self.settings.hotkey), self.settings.mode)

    def _on_loading(self, text: str) -> None:
        self._loading_text = text
        self.window.set_engine_status("loading", "Loading model", text)
        self._show_state()

    def _on_loaded(self, name: str, description: str) -> None:
        self.window.set_engine_status("ready", name, description)
        self._show_state()

    def _on_load_failed(self, message: str) -> None:
        self.window.set_engine_status("error", "No model", "See the Dictation page")
        self._show_state()

    # ---- dictation ---------------------------------------------------------------------------------

    def toggle(self, deliver: bool = True) -> None:
        """The tray's and ``sayso --toggle``'s way in: start a take, or stop the one under way."""
        self.flow.toggle(deliver)

    def _on_recording(self, app: str) -> None:
        self.settings_page.profiles.show_last_app(app)
        if self._overlay_shown:
            self.overlay.show_recording()
        self._level_timer.start()

    def _on_transcribing(self, note: str) -> None:
        if self._overlay_shown:
            self.overlay.show_transcribing(note)

    def _poll_level(self) -> None:
        level = self.microphone.level
        self.dictation_page.set_level(level)
        self.overlay.set_level(level)

    def _on_preview(self, text: str) -> None:
        if self._overlay_shown:
            self.overlay.set_text(text)

    def _on_dictation_done(self, text: str, result: DeliveryResult | None) -> None:
        if not text:
            return  # nothing heard: the flow's message says so
        if result is None:  # kept in Sayso, as asked
            self._show_last_dictation()
            self.overlay.hide()
        elif result.delivered:
            self._show_last_dictation()
            if self._overlay_shown:
                if result.confirmed:
                    self.overlay.show_message("Inserted", "ok", 900)
                elif result.message == UNFETCHED_PASTE:  # the window didn't take the text: History has it
                    self.overlay.show_message("Pasted, but the window didn't take it", "warn", 2500)
                else:  # keys sent that no one can see arrive: History's entry says why
                    self.overlay.show_message(f"{result.method.capitalize()}d, not confirmed", "info", 1500)
        else:
            self._show_last_dictation(kept=result.message)
            self._show_message("Text kept in Sayso: " + result.message, "warn")
            self.tray.notify("Dictation kept in Sayso", result.message)

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
        elif not can_float():  # Wayland without the layer shell: the user would otherwise never see it
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
