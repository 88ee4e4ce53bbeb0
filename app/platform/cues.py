"""Short sounds when recording starts and stops, so the user knows without looking.

Played through sounddevice (PySide6-Essentials has no QtMultimedia) on a short-lived thread, so the
GUI thread never waits for an output device to open. A machine without speakers just stays silent.
"""

from __future__ import annotations

import logging
import threading

import numpy as np
import soundfile

from sayso.app.platform.assets import resource

log = logging.getLogger(__name__)

CUES = ("start", "stop")


class CuePlayer:
    def __init__(self):
        self._sounds: dict[str, tuple[np.ndarray, int]] = {}

    def sound(self, name: str) -> tuple[np.ndarray, int]:
        """The cue's samples (float32 [n]) and rate, read from resources/<name>.wav once."""
        if name not in self._sounds:
            data, rate = soundfile.read(str(resource(f"{name}.wav")), dtype="float32")
            self._sounds[name] = (data, rate)
        return self._sounds[name]

    def play(self, name: str) -> threading.Thread:
        """Start playing ``name`` ("start" or "stop") and return at once."""
        thread = threading.Thread(target=self._play, args=(name,), name=f"sayso-cue-{name}", daemon=True)
        thread.start()
        return thread

    def _play(self, name: str) -> None:
        try:
            import sounddevice as sd

            data, rate = self.sound(name)
            with sd.OutputStream(samplerate=rate, channels=1, dtype="float32") as stream:
                stream.write(data)
        except Exception as error:  # no output device, PortAudio missing: a cue is never worth an error
            log.debug("cues: can't play %s: %s", name, error)
