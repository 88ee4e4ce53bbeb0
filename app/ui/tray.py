"""The tray icon: Sayso's state at a glance (indigo idle, red recording, amber transcribing) and a menu.

Desktops without a tray (some Wayland sessions, bare X) simply have none; ``available`` says which,
and notifications then go to the desktop's notification daemon (``app.notifications``).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from sayso.app.platform import assets
from sayso.app.platform.notifications import SHOWN_MS, send_notification


class Tray(QObject):
    show_window = Signal()
    toggle_recording = Signal()
    quit = Signal()

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.available = QSystemTrayIcon.isSystemTrayAvailable()
        self._icon = QSystemTrayIcon(assets.app_icon())
        self._icon.setToolTip("Sayso")
        menu = QMenu()
        self._record = QAction("Start dictation", menu)
        self._record.triggered.connect(self.toggle_recording)
        menu.addAction(self._record)
        menu.addAction("Open Sayso", self.show_window)
        menu.addSeparator()
        menu.addAction("Quit", self.quit)
        self._menu = menu
        self._icon.setContextMenu(menu)
        self._icon.activated.connect(self._activated)
        if self.available:
            self._icon.show()

    def set_state(self, state: str, tooltip: str) -> None:
        """``state``: idle, recording or transcribing."""
        self._icon.setIcon(assets.app_icon(state))
        self._icon.setToolTip(f"Sayso: {tooltip}")
        self._record.setText("Stop dictation" if state == "recording" else "Start dictation")

    def notify(self, title: str, message: str) -> None:
        """A desktop notification: through the tray, or the notification daemon where there is no tray."""
        if self.available and QSystemTrayIcon.supportsMessages():
            self._icon.showMessage(title, message, assets.app_icon(), SHOWN_MS)
        else:
            send_notification(title, message)

    def hide(self) -> None:
        self._icon.hide()

    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason == QSystemTrayIcon.ActivationReason.Trigger:
            self.show_window.emit()
