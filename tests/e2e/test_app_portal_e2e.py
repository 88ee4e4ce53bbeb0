"""End to end on Wayland's terms: Sayso runs as its own process in a Wayland session (by its environment)
with a GlobalShortcuts portal double on a private session bus; the portal's Activated and Deactivated
hold the shortcut while the test plays jfk.wav into the PulseAudio null sink that is its microphone.

No compositor runs here, so no Wayland paste tool reaches a window: the text is kept in Sayso (History)
and the user is told, which is what a desktop without wl-clipboard and wtype gets. Run with -s to see
key-up to text.
"""

import os
import sqlite3
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from e2e.app_process import AppProcess  # noqa: E402
from e2e.fixtures import desktop, portal, session_bus  # noqa: E402, F401

from support.data import AUDIO, TINY_EN_GGUF  # noqa: E402
from support.texts import JFK_WORDS, words  # noqa: E402

MODEL = TINY_EN_GGUF
JFK = AUDIO / "jfk.wav"


def test_hold_to_talk_through_the_portal(desktop, portal, tmp_path):
    data = tmp_path / "sayso-data"
    settings = {"model": str(MODEL), "device": "cpu", "hotkey": "ctrl+space", "mode": "hold", "cues": False}
    app = AppProcess(data, settings, env={"XDG_SESSION_TYPE": "wayland"})
    try:
        app.wait_for_log(r"Sayso is ready", timeout=600)
        assert portal.wait_for("bound") == [["dictate", "CTRL+space"]]
        app.wait_for_log(r"portal: shortcut bound", timeout=30)
        portal.press("activate")
        app.wait_for_log(r"recording \(target window", timeout=30)
        desktop.play(JFK)
        key_up = time.time()
        portal.press("deactivate")
        app.wait_for_log(r"kept in app", timeout=300)
        print(f"\nkey-up to text kept in Sayso (portal, 11 s of speech): {(time.time() - key_up) * 1000:.0f} ms")
        with sqlite3.connect(f"file:{data / 'history.sqlite3'}?mode=ro", uri=True) as db:
            (text,) = db.execute("SELECT text FROM dictations").fetchone()
        assert words(text) == JFK_WORDS
    finally:
        assert app.stop() == 0, "\n".join(app.log[-30:])
    assert portal.wait_for("closed")  # the session ends with the app
    kept = (data / "sayso.log").read_text()  # the log on disk: what happened, never what was said
    assert "portal: shortcut bound" in kept and "kept in app" in kept and "country" not in kept.lower()
