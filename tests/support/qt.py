"""Waiting on Qt signals in a test."""

from __future__ import annotations


def wait_for(signal, condition=lambda *args: True, timeout_ms: int = 300_000) -> tuple:
    """Run the Qt event loop until ``signal`` fires with arguments that satisfy ``condition``; returns
    those arguments, or fails the test after ``timeout_ms``."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop, got = QEventLoop(), []

    def fired(*args):
        if condition(*args) and not got:
            got.append(args)
            loop.quit()

    signal.connect(fired)
    QTimer.singleShot(timeout_ms, loop.quit)
    loop.exec()
    signal.disconnect(fired)
    assert got, f"no signal within {timeout_ms} ms"
    return got[0]
