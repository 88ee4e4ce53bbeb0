"""What any local user can read of the text Sayso delivers: the command lines of every process."""

import threading
from pathlib import Path


class CommandLineWatch:
    """Reads every process's command line (``/proc/*/cmdline``, which any local user may read) over and
    over on a thread, keeping those that hold ``secret``."""

    def __init__(self, secret: str):
        self.secret, self.found, self.rounds = secret.encode(), [], 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            for entry in Path("/proc").iterdir():
                try:
                    line = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
                except OSError:
                    continue  # the process ended meanwhile
                if self.secret in line:
                    self.found.append(line.replace(b"\0", b" ").decode(errors="replace"))
            self.rounds += 1

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_):
        self._stop.set()
        self._thread.join()
