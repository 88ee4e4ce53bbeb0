"""``sayso`` without a subcommand: run_app's --toggle and --screenshots, in their own processes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtGui import QImage  # noqa: E402

from support.data import AUDIO, ROOT, TINY_EN_GGUF  # noqa: E402

MODEL = TINY_EN_GGUF
JFK = AUDIO / "jfk.wav"


def _run(tmp_path, *args, timeout=600):
    env = {**os.environ, "SAYSO_DATA_DIR": str(tmp_path / "data"), "QT_QPA_PLATFORM": "offscreen"}
    return subprocess.run(
        [sys.executable, "-m", "sayso", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_toggle_without_a_running_sayso_says_so(tmp_path):
    result = _run(tmp_path, "--toggle", timeout=60)
    assert result.returncode == 1
    assert "isn't running" in result.stderr


EXPORT_AFTER_START = """
import os, stat, sys
from pathlib import Path
from sayso.app.main import run_app
from sayso.engine import formats
from sayso.engine.transcript import Segment, Transcript

os.umask(0o022)  # the usual default: the user's new files readable by others
run_app(["--toggle"])  # the app's start; no Sayso is running, so it returns there
srt = Path(sys.argv[1])
srt.write_text(formats.render(Transcript("Hello.", [Segment(0.0, 1.0, "Hello.")]), "srt"))  # as Files exports it
print(oct(stat.S_IMODE(srt.stat().st_mode)))
"""


def test_an_export_gets_the_users_umask_not_the_private_mode_of_the_history(tmp_path):
    """What the user exports is theirs to share, made as their other files are; only History's files are
    kept private, by their own modes (tests/app/test_privacy.py)."""
    env = {**os.environ, "SAYSO_DATA_DIR": str(tmp_path / "data"), "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, "-c", EXPORT_AFTER_START, str(tmp_path / "talk.srt")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "0o644"


def _image(path: Path) -> np.ndarray:
    image = QImage(str(path)).convertToFormat(QImage.Format.Format_RGBA8888)
    assert not image.isNull(), path
    pixels = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine() // 4, 4)
    return pixels[:, : image.width()].copy()  # a copy: the buffer dies with the QImage


def test_screenshots(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "settings.json").write_text(json.dumps({"model": str(MODEL), "device": "cpu"}))
    out = tmp_path / "shots"
    result = _run(tmp_path, "--screenshots", str(out), "--screenshot-audio", str(JFK))
    assert result.returncode == 0, result.stderr[-3000:]
    names = sorted(p.name for p in out.glob("*.png"))
    assert names == [
        "files-view.png", "history.png", "main-window.png", "models.png", "overlay-recording.png", "settings.png"
    ]  # fmt: skip
    window = _image(out / "main-window.png")
    assert window.shape[:2] == (660, 980)
    files = _image(out / "files-view.png")
    assert files.shape == window.shape and not np.array_equal(files, window)
    overlay = _image(out / "overlay-recording.png")
    assert overlay.shape[1] == 400 and overlay[overlay.shape[0] // 2, overlay.shape[1] // 2, 3] > 200
    assert overlay[0, 0, 3] == 0  # rounded, transparent corners
