"""Privacy: what is said stays on this computer, in Sayso's folder, readable by the user alone.

A child process with a fresh home (nothing but the voice activity model in its cache, as ``setup.sh``
leaves it) does what a dictation does (the recording and its row saved, the audio through the engine
thread, the text stored) and transcribes a file, with the default model folder and device ("auto"). Every
attempt to reach the network is recorded and refused twice over: ``socket.socket`` and
``socket.create_connection`` are replaced by ones that record and refuse (observing, not standing in for
a part), and an audit hook records every connect, name lookup and send of any socket made from Python.
None may happen, and no file may appear outside Sayso's data folder but for what its cache makes of the
software and the GPU alone (wgpu's compiled C declarations, the kernel list): ONNX Runtime's telemetry (which
runs in C++ and so escapes the hooks) announces itself with a device id under ~/.cache/Microsoft and a
session file in the temp folder, and it fails this test if it is ever on again.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np

from support.data import AUDIO, TINY_EN_GGUF, needs_clips

CHILD = """
import json, socket, sys

attempts = []
NETWORK_EVENTS = {"socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
                  "socket.sendto", "socket.sendmsg", "socket.bind"}


def audit(event, args):
    if event in NETWORK_EVENTS:
        family = getattr(args[0], "family", None)
        if family != socket.AF_UNIX:
            attempts.append(f"{event} {args[1:]!r}")


sys.addaudithook(audit)


class Refused(socket.socket):
    def connect(self, address):
        attempts.append(f"socket.connect {address!r}")
        raise OSError("this test allows no network")

    connect_ex = connect


def create_connection(address, *args, **kwargs):
    attempts.append(f"socket.create_connection {address!r}")
    raise OSError("this test allows no network")


socket.socket, socket.create_connection = Refused, create_connection

from PySide6.QtCore import QCoreApplication, QEventLoop, QTimer

from sayso.app.core.engine_worker import EngineClient
from sayso.app.core.history import History
from sayso.engine.audio import load_audio
from sayso.engine.models import data_dir

model, speech, file = sys.argv[1:4]
app = QCoreApplication([])
client = EngineClient()
done = {}


def watch(job):  # the job's id; its text (or failure) goes to done under it
    job.finished.connect(lambda transcript, j=job.id: done.__setitem__(j, transcript.text))
    job.failed.connect(lambda message, j=job.id: done.__setitem__(j, "FAILED: " + message))
    return job.id


def wait(condition):
    loop = QEventLoop()
    timer = QTimer()
    timer.timeout.connect(lambda: condition() and loop.quit())
    timer.start(5)
    QTimer.singleShot(300_000, loop.quit)
    loop.exec()


client.load(model, "auto")
wait(lambda: client.ready or client.load_error)
history = History(data_dir())
pcm = load_audio(speech)
entry = history.add(pcm, client.model_name)
dictation = watch(client.submit_pcm(pcm))
wait(lambda: dictation in done)
history.finish(entry.id, done[dictation], client.model_name)
transcription = watch(client.submit_file(file))
wait(lambda: transcription in done)
client.shutdown()
history.close()
print(json.dumps({"attempts": attempts, "dictation": done[dictation], "file": done[transcription],
                  "load_error": client.load_error, "data": str(data_dir())}))
"""


@needs_clips("beckett.wav")
def test_a_dictation_and_a_file_touch_no_network_and_no_file_outside_the_data_folder(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "tmp").mkdir()
    own = ("SAYSO_", "XDG_DATA", "XDG_CACHE", "XDG_CONFIG", "ORT_")  # ORT_: the child must switch telemetry off itself
    env = {key: value for key, value in os.environ.items() if not key.startswith(own)}
    env.update(HOME=str(home), TMPDIR=str(tmp_path / "tmp"), QT_QPA_PLATFORM="offscreen")
    before = set(tmp_path.rglob("*"))
    command = [sys.executable, "-c", CHILD, str(TINY_EN_GGUF), str(AUDIO / "jfk.wav"), str(AUDIO / "beckett.wav")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    print(f"\nnetwork attempts: {report['attempts']}; dictation: {report['dictation']}; file: {report['file']}")
    assert report["load_error"] is None
    assert report["attempts"] == []
    assert "ask not what your country can do for you" in report["dictation"].lower()
    assert "fail better" in report["file"].lower()

    data = Path(report["data"])
    assert data == home / ".local" / "share" / "sayso"  # the default place, under the user's home
    written = {path for path in set(tmp_path.rglob("*")) - before if path.is_file()}
    # Allowed elsewhere, in Sayso's cache, only what is made from the software and the GPU: wgpu's C
    # declarations compiled once (engine.gpu.wgpu_ffi) and, on a real GPU, the list of kernels built.
    cache = home / ".cache" / "sayso"
    derived = {path for path in written if path.parent in (cache / "wgpu", cache / "kernels")}
    assert all(path.name.startswith("wgpu_ffi_") for path in derived if path.parent == cache / "wgpu")
    outside = sorted(str(path) for path in written - derived if data not in path.parents)
    assert outside == [], f"written outside {data}: {outside}"
    assert {p.name for p in written} >= {"history.sqlite3"} and any(p.suffix == ".wav" for p in written)
    private(data)


def private(data: Path) -> None:
    """The folders under ``data`` are 0700, the history and recordings 0600."""
    for path in [data, *data.rglob("*")]:
        expected = 0o700 if path.is_dir() else 0o600
        assert stat.S_IMODE(path.stat().st_mode) == expected, f"{path}: {oct(path.stat().st_mode)}"


def test_history_files_are_the_users_alone_whatever_the_umask(tmp_path):
    from sayso.app.core.history import History

    folder = tmp_path / "sayso"
    folder.mkdir(mode=0o755)
    (folder / "recordings").mkdir(mode=0o755)  # made readable by an older version or by hand
    previous = os.umask(0o022)  # the usual default: new files readable by everyone
    try:
        history = History(folder)
        entry = history.add(np.zeros(1600, np.float32))
        assert (folder / "history.sqlite3-wal").exists() and (folder / "history.sqlite3-shm").exists()
        private(folder)
        assert entry.audio_path.parent == folder / "recordings"
        history.close()
    finally:
        os.umask(previous)
