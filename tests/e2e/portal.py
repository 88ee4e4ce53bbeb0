"""Driving portal_double.py: a GlobalShortcuts portal in another process, on a private session bus."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

PROGRAM = Path(__file__).with_name("portal_double.py")


class PortalDouble:
    """Starts the double (DBUS_SESSION_BUS_ADDRESS must be set) and collects what it reports."""

    def __init__(self):
        self.process = subprocess.Popen([sys.executable, str(PROGRAM)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        self.reports: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.wait_for("ready")

    def _read(self) -> None:
        for line in self.process.stdout:
            self.reports.put(json.loads(line))

    def wait_for(self, key: str, timeout: float = 20):
        """The next report holding ``key`` (earlier ones are dropped)."""
        while True:
            report = self.reports.get(timeout=timeout)
            if key in report:
                return report[key]

    def press(self, member: str) -> None:
        """``activate`` or ``deactivate``: the portal's signal for every bound shortcut."""
        self.process.stdin.write(member + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
