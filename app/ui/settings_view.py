"""The Settings page. Every change applies at once (no OK button) and is saved by the coordinator."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QWidget,
)

from sayso.app.platform import assets
from sayso.app.platform.hotkeys import format_hotkey, parse_hotkey, shortcut_route
from sayso.app.platform.locations import settings_file
from sayso.app.ui.overlay import can_float
from sayso.app.platform.microphone import MicrophoneError, input_devices
from sayso.app.core.models import title
from sayso.engine import DEFAULT_MODEL
from sayso.app.core.settings import Settings
from sayso.app.ui.style import COLORS
from sayso.app.ui.writing_settings import CleanupCard, ProfilesCard, WritingCard
from sayso.app.ui.widgets import Card, ElidedLabel, NoticeBar, icon_button, scrolling_page
from sayso.app.ui.widgets import select_data as _select
from sayso.app.ui.widgets import settings_row as _row

LANGUAGES = [
    ("", "Detect automatically"), ("en", "English"), ("de", "German"), ("fr", "French"), ("es", "Spanish"),
    ("it", "Italian"), ("pt", "Portuguese"), ("nl", "Dutch"), ("pl", "Polish"), ("sv", "Swedish"),
    ("da", "Danish"), ("no", "Norwegian"), ("fi", "Finnish"), ("cs", "Czech"), ("uk", "Ukrainian"),
    ("ru", "Russian"), ("tr", "Turkish"), ("ar", "Arabic"), ("hi", "Hindi"), ("zh", "Chinese"),
    ("ja", "Japanese"), ("ko", "Korean"),
]  # fmt: skip
DEFAULT_MODEL_LABEL = f"{title(DEFAULT_MODEL)} (default)"
_CHOOSE = "\0choose"

# Qt's modifier keys, by the X keysym that tells left from right (a modifier-only shortcut keeps its side).
_SIDED_KEYSYMS = {
    0xFFE3: "ctrl_l", 0xFFE4: "ctrl_r", 0xFFE1: "shift_l", 0xFFE2: "shift_r", 0xFFE9: "alt_l", 0xFFEA: "alt_r",
    0xFE03: "alt_r", 0xFFEB: "super_l", 0xFFEC: "super_r",
}  # fmt: skip
_MODIFIER_KEYS = {
    Qt.Key.Key_Control: "ctrl", Qt.Key.Key_Shift: "shift", Qt.Key.Key_Alt: "alt", Qt.Key.Key_AltGr: "alt_r",
    Qt.Key.Key_Meta: "super", Qt.Key.Key_Super_L: "super_l", Qt.Key.Key_Super_R: "super_r",
}  # fmt: skip


def available_models() -> list[tuple[str, str]]:
    """(label, value) of the models to choose from: the default, then the others the engine knows."""
    from sayso.engine import models

    choices = [(DEFAULT_MODEL_LABEL, "")]
    for name in models.available():
        if name != models.DEFAULT_MODEL:
            fetched = models.model_path(name).is_file()
            choices.append((title(name) if fetched else f"{title(name)} (downloaded when chosen)", name))
    return choices


def _shown_path(path: Path) -> str:
    """``path`` with the home folder written ``~``, as people know it."""
    path, home = Path(path), Path.home()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


def key_name(event: QKeyEvent) -> str | None:
    """Our name for the key of a Qt key event (see hotkeys.parse_hotkey), or None for keys we can't watch."""
    key = Qt.Key(event.key())
    if key in _MODIFIER_KEYS:
        return _SIDED_KEYSYMS.get(event.nativeVirtualKey(), _MODIFIER_KEYS[key])
    text = QKeySequence(key).toString(QKeySequence.SequenceFormat.PortableText).lower()
    try:
        (name,) = parse_hotkey(text)
    except ValueError:
        return None
    return name


class ShortcutEdit(QLineEdit):
    """Click, then press the shortcut: every key held together becomes the chord when they are released.

    A chord of modifiers alone keeps their sides ("Right Alt"), a common push-to-talk key; with another
    key, modifiers match either side. Escape cancels.
    """

    changed = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setReadOnly(True)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self._value = ""
        self._pressed: list[str] = []
        self._down: set[str] = set()
        self.setPlaceholderText("Press keys…")

    def set_value(self, hotkey: str) -> None:
        self._value = hotkey
        self.setText(format_hotkey(hotkey))

    def value(self) -> str:
        return self._value

    def focusInEvent(self, event) -> None:
        super().focusInEvent(event)
        self._pressed, self._down = [], set()
        self.setText("")

    def focusOutEvent(self, event) -> None:
        super().focusOutEvent(event)
        self.setText(format_hotkey(self._value))

    def event(self, event) -> bool:
        # Tab must be recordable too, so it is taken here before Qt uses it to move the focus.
        if event.type() == QEvent.Type.KeyPress and event.key() in (Qt.Key.Key_Tab, Qt.Key.Key_Backtab):
            self.keyPressEvent(event)
            return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self.clearFocus()
            return
        if event.isAutoRepeat():
            return
        name = key_name(event)
        if name is None:
            return
        if name not in self._pressed:
            self._pressed.append(name)
        self._down.add(name)
        self.setText(format_hotkey("+".join(self._pressed)))

    def keyReleaseEvent(self, event: QKeyEvent) -> None:
        if event.isAutoRepeat():
            return
        self._down.discard(key_name(event) or "")
        if self._down or not self._pressed:
            return
        keys = self._pressed
        if any(k not in _SIDED_KEYSYMS.values() for k in keys):  # with a normal key, modifiers may be either side
            keys = [k.split("_")[0] if k in _SIDED_KEYSYMS.values() else k for k in keys]
        self._value = "+".join(dict.fromkeys(keys))
        self._pressed = []
        self.clearFocus()
        self.changed.emit(self._value)


class SettingsPage(QWidget):
    changed = Signal(object)  # the new Settings
    rescan_requested = Signal()  # the user wants the microphone list read again

    def __init__(self, settings: Settings, data_dir: Path, parent: QWidget | None = None):
        super().__init__(parent)
        self._settings = settings
        self._loading = False
        column = scrolling_page(self, "Settings", "Changes apply right away.")

        shortcut_works, shortcut_how = shortcut_route()
        if not shortcut_works:
            notice = NoticeBar()
            notice.show_text(shortcut_how)
            column.addWidget(notice)

        # --- dictation
        card = Card("Dictation")
        self.shortcut = ShortcutEdit()
        self.shortcut.changed.connect(self._changed)
        how = f" {shortcut_how}" if shortcut_works else ""
        card.body.addWidget(
            _row("Shortcut", f"Click the field, then press the keys you want to use.{how}", self.shortcut)
        )
        self.mode = QComboBox()
        self.mode.addItem("Hold to talk", "hold")
        self.mode.addItem("Press to start, press to stop", "toggle")
        self.mode.currentIndexChanged.connect(self._changed)
        card.body.addWidget(
            _row("Mode", "Hold the shortcut while you speak, or press it once to start and once to stop.", self.mode)
        )
        self.hands_free = QCheckBox("Stop when I pause")
        self.hands_free.toggled.connect(self._changed)
        card.body.addWidget(
            _row("Hands-free", "A dictation started by pressing the shortcut (or from the tray or the button) ends "
                 "by itself when you pause for 0.8 s after speaking.", self.hands_free)
        )
        self.microphone = QComboBox()
        self.microphone.currentIndexChanged.connect(self._changed)
        rescan = icon_button("redo", "Look for microphones again (after plugging one in)")
        rescan.clicked.connect(self.rescan_requested)
        microphone = QWidget()
        mic_row = QHBoxLayout(microphone)
        mic_row.setContentsMargins(0, 0, 0, 0)
        mic_row.setSpacing(6)
        mic_row.addWidget(self.microphone, 1)
        mic_row.addWidget(rescan)
        card.body.addWidget(_row("Microphone", "", microphone))
        self.cues = QCheckBox("Play a sound")
        self.cues.toggled.connect(self._changed)
        card.body.addWidget(_row("Sound cues", "A short tone when recording starts and stops.", self.cues))
        self.overlay = QCheckBox("Show while recording")
        self.overlay.toggled.connect(self._changed)
        floating = "A small bar at the bottom of the screen; it never takes the focus."
        if not can_float():
            self.overlay.setEnabled(False)
            floating = ("Not on this desktop, which lets no app place a bar above the others (it has no layer "
                        "shell): the tray icon shows when Sayso listens, and messages appear here and as "
                        "notifications.")  # fmt: skip
        card.body.addWidget(_row("Floating indicator", floating, self.overlay))
        self.preview = QCheckBox("Show words while speaking")
        self.preview.toggled.connect(self._changed)
        card.body.addWidget(_row("Live text", "Transcribes as you speak. Uses more processing power.", self.preview))
        column.addWidget(card)

        # --- output
        card = Card("Output")
        self.delivery = QComboBox()
        self.delivery.addItem("Paste (your clipboard is restored)", "paste")
        self.delivery.addItem("Type the text", "type")
        self.delivery.currentIndexChanged.connect(self._changed)
        card.body.addWidget(
            _row(
                "Insert text by",
                "Paste is instant; typing works where pasting doesn't. Terminals are always typed into.",
                self.delivery,
            )
        )
        column.addWidget(card)

        # --- model
        card = Card("Speech model")
        self.model = QComboBox()
        self.model.activated.connect(self._model_activated)
        card.body.addWidget(
            _row(
                "Model",
                "Larger models are more accurate and slower. New ones are fetched and converted once.",
                self.model,
            )
        )
        self.device = QComboBox()
        for value, text in (("auto", "Automatic"), ("gpu", "GPU"), ("cpu", "CPU")):
            self.device.addItem(text, value)
        self.device.currentIndexChanged.connect(self._changed)
        card.body.addWidget(_row("Run on", "Automatic uses the GPU when there is one.", self.device))
        self.language = QComboBox()
        for code, name in LANGUAGES:
            self.language.addItem(name, code)
        self.language.currentIndexChanged.connect(self._changed)
        card.body.addWidget(_row("Language", "English-only models (.en) always hear English.", self.language))
        self.vocabulary = QPlainTextEdit()
        self.vocabulary.setPlaceholderText("e.g. Sayso, Kubernetes, Dr. Okafor")
        self.vocabulary.setFixedHeight(72)
        self._vocabulary_timer = QTimer(self)
        self._vocabulary_timer.setSingleShot(True)
        self._vocabulary_timer.setInterval(600)
        self._vocabulary_timer.timeout.connect(self._changed)
        self.vocabulary.textChanged.connect(self._vocabulary_timer.start)
        card.body.addWidget(_row("Vocabulary", "Names and terms the model should spell your way.", self.vocabulary))
        column.addWidget(card)

        # --- the text: commands and vocabulary, cleanup, per-app profiles
        self.writing = WritingCard()
        self.cleanup = CleanupCard()
        self.profiles = ProfilesCard(available_models, LANGUAGES)
        for card in (self.writing, self.cleanup, self.profiles):
            card.changed.connect(self._changed)
            column.addWidget(card)

        # --- start-up
        card = Card("Start-up")
        self.start_at_login = QCheckBox("Start Sayso when I log in")
        self.start_at_login.toggled.connect(self._changed)
        card.body.addWidget(_row("At login", "Sayso starts in the tray, ready for your shortcut.", self.start_at_login))
        column.addWidget(card)

        # --- data
        card = Card("Your data")
        folder = QPushButton(assets.icon("folder", COLORS["muted"], 16), "Open folder")
        folder.clicked.connect(lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(str(data_dir))))
        row = _row("Data folder", "History, recordings and models; then your settings:", folder)
        texts = row.layout().itemAt(0).layout()
        for path in (data_dir, settings_file(data_dir)):  # one line each, shortened in the middle where long
            texts.addWidget(ElidedLabel(_shown_path(path), "Muted", mode=Qt.TextElideMode.ElideMiddle))
        card.body.addWidget(row)
        column.addWidget(card)
        column.addStretch(1)
        self.load(settings)

    # ---- settings <-> controls ----------------------------------------------------------------------

    def load(self, settings: Settings) -> None:
        """Show ``settings`` in the controls without emitting ``changed``."""
        self._loading = True
        self._settings = settings
        self.shortcut.set_value(settings.hotkey)
        _select(self.mode, settings.mode)
        self.hands_free.setChecked(settings.hands_free)
        self._fill_microphones(settings.input_device)
        self.cues.setChecked(settings.cues)
        self.overlay.setChecked(settings.overlay)
        self.preview.setChecked(settings.live_preview)
        self.start_at_login.setChecked(settings.start_at_login)
        _select(self.delivery, settings.delivery)
        self._fill_models(settings.model)
        _select(self.device, settings.device)
        _select(self.language, settings.language)
        if self.vocabulary.toPlainText() != settings.vocabulary:
            self.vocabulary.setPlainText(settings.vocabulary)
        self._vocabulary_timer.stop()
        for card in (self.writing, self.cleanup, self.profiles):
            card.load(settings)
        self._loading = False

    def current(self) -> Settings:
        return self._settings.with_changes(
            hotkey=self.shortcut.value(),
            mode=self.mode.currentData(),
            hands_free=self.hands_free.isChecked(),
            input_device=self.microphone.currentData(),
            cues=self.cues.isChecked(),
            overlay=self.overlay.isChecked(),
            live_preview=self.preview.isChecked(),
            start_at_login=self.start_at_login.isChecked(),
            delivery=self.delivery.currentData(),
            model=self.model.currentData() if self.model.currentData() != _CHOOSE else self._settings.model,
            device=self.device.currentData(),
            language=self.language.currentData(),
            vocabulary=self.vocabulary.toPlainText().strip(),
            **self.writing.values(), **self.cleanup.values(), **self.profiles.values(),
        )

    def _changed(self, *_) -> None:
        if self._loading:
            return
        new = self.current()
        if new != self._settings:
            self._settings = new
            self.changed.emit(new)

    def show_microphones(self) -> None:
        """Re-read the microphone list (keeping the choice) without emitting ``changed``."""
        self._loading = True
        self._fill_microphones(self._settings.input_device)
        self._loading = False

    def _fill_microphones(self, selected: str) -> None:
        self.microphone.clear()
        self.microphone.addItem("System default", "")
        try:
            names = [d.name for d in input_devices()]
        except MicrophoneError:
            names = []
        for name in dict.fromkeys(names):
            self.microphone.addItem(name, name)
        if selected and self.microphone.findData(selected) < 0:
            self.microphone.addItem(f"{selected} (not connected)", selected)
        _select(self.microphone, selected)

    def _fill_models(self, selected: str) -> None:
        self.model.clear()
        for text, value in available_models():
            self.model.addItem(text, value)
        if selected and self.model.findData(selected) < 0:
            self.model.addItem(Path(selected).stem, selected)
        self.model.addItem("Choose a model file…", _CHOOSE)
        _select(self.model, selected)

    def _model_activated(self, index: int) -> None:
        if self.model.itemData(index) == _CHOOSE:
            path, _ = QFileDialog.getOpenFileName(self, "Choose a model", str(Path.home()), "GGUF models (*.gguf)")
            self._loading = True
            self._fill_models(path or self._settings.model)
            self._loading = False
        self._changed()
