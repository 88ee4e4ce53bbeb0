"""Notices reach the desktop's notification daemon (a real one, dunst, on Xvfb and a private session bus)
when there is no tray to show them."""

import os
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from e2e.fixtures import session_bus, x_display  # noqa: E402, F401
from e2e.services import start_notification_daemon  # noqa: E402

from sayso.app.ui.tray import Tray  # noqa: E402


def test_a_notice_reaches_the_notification_daemon_without_a_tray(qtbot, x_display, session_bus, tmp_path):
    daemon = start_notification_daemon(tmp_path)
    try:
        tray = Tray()
        tray.available = False  # the desktop has no tray (this Xvfb may show trayer's panel for other tests)
        tray.notify("Dictation kept in Sayso", "The window changed before the text was ready, so it was kept here.")
        deadline = time.monotonic() + 15
        while not daemon.lines() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert daemon.lines() == ["Dictation kept in Sayso\tThe window changed before the text was ready, so it "
                                  "was kept here."]
    finally:
        daemon.stop()
