"""Long use: 200 dictations in a row, then 50 files queued at once, through the app's engine thread
(``EngineClient`` with the real engine: Whisper tiny.en on the numpy backend) and its history, in a
child process that reports its own memory.

Each dictation takes the app's path: the recording and its row are saved (``History.add``), the audio
goes to the engine thread (``submit_pcm``), the text comes back (``finished``) and is stored
(``History.finish``). The clip is real speech (cards/001.wav, "ten of clubs", 1.1 s). The files are 50
copies of another clip, all queued before the first is done, as when a folder is dropped on the window.

Memory is the child's resident set (VmRSS): after a warm-up of three dictations and one file (the
model's first passes allocate what it keeps, the first file loads FFmpeg's libraries: 18 MB), every 50
dictations, and after the 50 files. The bound: it grows by less
than GROWTH_BOUND_MB over the whole run, about 13 kB per job; a leak of one 16 kHz clip per dictation
(35 kB) would cross it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import AUDIO, REFERENCE_GGUF

DICTATIONS = 200
FILES = 50
GROWTH_BOUND_MB = 10

CHILD = """
import json, shutil, sys, time
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QEventLoop, QTimer

from app.engine_worker import EngineClient
from app.history import History
from engine.audio import load_audio

model, dictation_clip, file_clip, folder, dictations, files = sys.argv[1:7]
dictations, files, folder = int(dictations), int(files), Path(folder)


def rss_mb():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:")) / 1024


app = QCoreApplication([])
client = EngineClient()
done = {}
client.finished.connect(lambda job, transcript: done.__setitem__(job, transcript.text))
client.failed.connect(lambda job, message: done.__setitem__(job, "FAILED: " + message))


def wait(condition, seconds=600):
    loop = QEventLoop()
    timer = QTimer()
    timer.timeout.connect(lambda: condition() and loop.quit())
    timer.start(5)
    QTimer.singleShot(seconds * 1000, loop.quit)
    loop.exec()
    assert condition(), "timed out"


client.load(model, "cpu")
wait(lambda: client.ready)
history = History(folder / "data")
pcm = load_audio(dictation_clip)


def dictate():
    entry = history.add(pcm, client.model_name)
    job = client.submit_pcm(pcm)
    wait(lambda: job in done)
    history.finish(entry.id, done[job], client.model_name)
    return done.pop(job)


def transcribe_files(paths):
    jobs = [client.submit_file(path) for path in paths]
    wait(lambda: all(job in done for job in jobs))
    return sorted({done.pop(job) for job in jobs})


paths = []
for i in range(files + 1):
    paths.append(folder / f"file-{i:02d}.wav")
    shutil.copyfile(file_clip, paths[-1])
for _ in range(3):
    dictate()
transcribe_files(paths[:1])
report = {"start_mb": rss_mb(), "texts": {}, "every_50_mb": []}
started = time.monotonic()
for i in range(dictations):
    text = dictate()
    report["texts"][text] = report["texts"].get(text, 0) + 1
    if (i + 1) % 50 == 0:
        report["every_50_mb"].append(rss_mb())
report["dictation_seconds"] = time.monotonic() - started
report["after_dictations_mb"] = rss_mb()

started = time.monotonic()
report["file_texts"] = transcribe_files(paths[1:])
report["file_seconds"] = time.monotonic() - started
report["end_mb"] = rss_mb()
rows = history.search(limit=10_000)
report["rows"] = len(rows)
report["rows_done"] = sum(row.status == "done" and row.audio_path.exists() for row in rows)
client.shutdown()
print(json.dumps(report))
"""


def test_200_dictations_and_50_queued_files_in_bounded_memory(tmp_path):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(REFERENCE_GGUF), str(AUDIO / "cards" / "001.wav"),
         str(AUDIO / "commands" / "goforward.wav"), str(tmp_path), str(DICTATIONS), str(FILES)],
        capture_output=True, text=True, timeout=1200, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    growth = report["end_mb"] - report["start_mb"]
    print(
        f"\n{DICTATIONS} dictations in {report['dictation_seconds']:.0f} s, {FILES} queued files in "
        f"{report['file_seconds']:.0f} s; memory {report['start_mb']:.0f} MB after warming up, every 50 "
        f"dictations {[round(mb) for mb in report['every_50_mb']]} MB, {report['end_mb']:.0f} MB at the end "
        f"({growth:+.1f} MB; bound +{GROWTH_BOUND_MB} MB); texts {report['texts']}, files {report['file_texts']}"
    )
    assert report["rows"] == report["rows_done"] == DICTATIONS + 3  # the warm-up's three too
    ((text, count),) = report["texts"].items()  # the same words every time
    assert count == DICTATIONS and " of " in text.lower()  # "10 of close." is what tiny.en hears
    assert len(report["file_texts"]) == 1 and "go forward" in report["file_texts"][0].lower()
    assert growth < GROWTH_BOUND_MB
