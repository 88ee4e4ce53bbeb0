"""Sayso itself as a separate process (``python -m app``), as the user starts it, with its log at hand."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class AppProcess:
    """Runs the app with its own data folder and settings; ``wait_for_log`` reads its log as it comes."""

    def __init__(self, data_dir: Path, settings: dict, *args: str, env: dict | None = None, preexec_fn=None):
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "settings.json").write_text(json.dumps(settings))
        self.env = {**os.environ, "QT_QPA_PLATFORM": "xcb", **(env or {}), "SAYSO_DATA_DIR": str(data_dir)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sayso", *args],
            cwd=REPO,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=preexec_fn,  # runs in the child before the app: limits on what it may do
        )
        self.log: list[str] = []
        self._lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self._lines.put(line.rstrip("\n"))

    def wait_for_log(self, pattern: str, timeout: float, since: int = 0) -> re.Match:
        """The first log line from line ``since`` (by default the start) that matches ``pattern``; fails
        after ``timeout`` seconds."""
        regex = re.compile(pattern)
        for line in self.log[since:]:
            if match := regex.search(line):
                return match
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.process.poll() is not None and self._lines.empty():
                tail = "\n".join(self.log[-30:])
                raise AssertionError(f"no log line matching {pattern!r} within {timeout} s; log:\n{tail}")
            try:
                line = self._lines.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            self.log.append(line)
            if match := regex.search(line):
                return match

    def run(self, *args: str) -> subprocess.CompletedProcess:
        """Another ``sayso`` invocation against this instance (e.g. ``--toggle``)."""
        return subprocess.run(
            [sys.executable, "-m", "sayso", *args], cwd=REPO, env=self.env, capture_output=True, text=True, timeout=60
        )

    def stop(self) -> int:
        self.process.terminate()  # SIGTERM: the app quits cleanly
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
