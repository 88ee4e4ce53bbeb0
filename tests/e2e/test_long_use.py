"""Long use: 200 dictations in a row, then 50 files queued at once, through the app's engine thread
(``EngineClient`` with the real engine: Whisper tiny.en on the numpy backend) and its history, in a
child process that reports its own memory.

Each dictation takes the app's path: the recording and its row are saved (``History.add``), the audio
goes to the engine thread (``submit_pcm``), the text comes back (its job's ``finished``) and is stored
(``History.finish``). The clip is real speech (cards/001.wav, "ten of clubs", 1.1 s). The files are 50
copies of another clip, all queued before the first is done, as when a folder is dropped on the window.

Memory is the child's resident set (VmRSS), read after every 50 dictations and around the 50 files.
It is compared like with like, because glibc's malloc arenas (the numpy backend's two block threads
each have one) hold the peak of whatever ran last, dictations or files, and the level swings by up to
17 MB between the two kinds of job while each kind alone stays flat to 0.1 MB:
- dictations: from the 50th to the 200th it grows by less than DICTATION_BOUND_MB; a leak of one
  1.1 s clip per dictation (70 kB with its float32 copy) would add 10 MB;
- files: across the 50 files it grows by less than FILE_BOUND_MB; a leak of one 2.8 s clip per file
  (180 kB) would add 9 MB.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from support.data import AUDIO, TINY_EN_GGUF, needs_clips

DICTATIONS = 200
FILES = 50
WARM_UP = 3  # dictations before the first reading, then one file: the model's first passes allocate what it keeps
DICTATION_BOUND_MB = 3
FILE_BOUND_MB = 5

CHILD = """
import json, shutil, sys, time
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QEventLoop, QTimer

from sayso.app.core.engine_worker import EngineClient
from sayso.app.core.history import History
from sayso.engine.audio import load_audio

model, dictation_clip, file_clip, folder, dictations, files, warm_up = sys.argv[1:8]
dictations, files, warm_up, folder = int(dictations), int(files), int(warm_up), Path(folder)


def rss_mb():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:")) / 1024


app = QCoreApplication([])
client = EngineClient()
done = {}


def watch(job):  # the job's id; its text (or failure) goes to done under it
    job.finished.connect(lambda transcript, j=job.id: done.__setitem__(j, transcript.text))
    job.failed.connect(lambda message, j=job.id: done.__setitem__(j, "FAILED: " + message))
    return job.id


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
    job = watch(client.submit_pcm(pcm))
    wait(lambda: job in done)
    history.finish(entry.id, done[job], client.model_name)
    return done.pop(job)


def transcribe_files(paths):
    jobs = [watch(client.submit_file(path)) for path in paths]
    wait(lambda: all(job in done for job in jobs))
    return sorted({done.pop(job) for job in jobs})


paths = []
for i in range(files + 1):
    paths.append(folder / f"file-{i:02d}.wav")
    shutil.copyfile(file_clip, paths[-1])
for _ in range(warm_up):
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


@needs_clips("cards/001.wav", "commands/goforward.wav")
@pytest.mark.slow
def test_200_dictations_and_50_queued_files_in_bounded_memory(tmp_path):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(TINY_EN_GGUF), str(AUDIO / "cards" / "001.wav"),
         str(AUDIO / "commands" / "goforward.wav"), str(tmp_path), str(DICTATIONS), str(FILES), str(WARM_UP)],
        capture_output=True, text=True, timeout=1200, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    dictations = report["every_50_mb"][-1] - report["every_50_mb"][0]
    files = report["end_mb"] - report["after_dictations_mb"]
    print(
        f"\n{DICTATIONS} dictations in {report['dictation_seconds']:.0f} s, {FILES} queued files in "
        f"{report['file_seconds']:.0f} s; memory {report['start_mb']:.0f} MB after warming up, every 50 "
        f"dictations {[round(mb, 1) for mb in report['every_50_mb']]} MB ({dictations:+.1f} MB; bound "
        f"+{DICTATION_BOUND_MB} MB), {report['end_mb']:.1f} MB after the files ({files:+.1f} MB; bound "
        f"+{FILE_BOUND_MB} MB); texts {report['texts']}, files {report['file_texts']}"
    )
    assert report["rows"] == report["rows_done"] == DICTATIONS + WARM_UP  # the warm-up's too
    ((text, count),) = report["texts"].items()  # the same words every time
    assert count == DICTATIONS and " of " in text.lower()  # "10 of close." is what tiny.en hears
    assert len(report["file_texts"]) == 1 and "go forward" in report["file_texts"][0].lower()
    assert dictations < DICTATION_BOUND_MB and files < FILE_BOUND_MB
