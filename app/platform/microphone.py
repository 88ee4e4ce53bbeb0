"""The microphone: one input stream kept open while the app runs, resampled to 16 kHz mono as it arrives.

Keeping the stream open means pressing the shortcut records at once (opening a device takes tens to
hundreds of milliseconds), and lets a ring buffer hold the last ~0.5 s before the key went down, so the
first word is never cut even when the user starts speaking while pressing. The stream runs at the
device's own rate (what it does natively, no driver-side resampling) and soxr's streaming resampler
turns each callback's block into 16 kHz mono, the only format the engine takes.

Threads: ``open``/``close``/``start_take``/``stop_take`` are called from the GUI thread; the callback
runs on PortAudio's thread and hands each 16 kHz block to the take's ``sink`` (the engine thread's
queue) without touching Qt.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import soxr

from sayso.engine import SAMPLE_RATE

log = logging.getLogger(__name__)

PREROLL_SECONDS = 0.5
_SILENCE_DB = -60.0  # the level meter's floor


class MicrophoneError(Exception):
    """The microphone can't be used; the message says why and what to do."""


class InputDevice(NamedTuple):
    name: str
    index: int
    samplerate: float
    is_default: bool


def _sounddevice():
    """Import sounddevice on first use: it loads PortAudio, which enumerates devices once at import."""
    try:
        import sounddevice
    except OSError as error:  # the PortAudio library itself is missing
        raise MicrophoneError(f"Audio input is unavailable: {error}. Install PortAudio (libportaudio2).") from error
    return sounddevice


def input_devices() -> list[InputDevice]:
    """Every device that can record, the system default first."""
    sd = _sounddevice()
    try:
        default = sd.default.device[0]
        devices = [
            InputDevice(d["name"], d["index"], float(d["default_samplerate"]), d["index"] == default)
            for d in sd.query_devices()
            if d["max_input_channels"] > 0
        ]
    except sd.PortAudioError as error:
        raise MicrophoneError(f"Can't list microphones: {error}.") from error
    return sorted(devices, key=lambda d: not d.is_default)


def rescan_devices() -> None:
    """Make PortAudio list the devices again: it reads them once, when it starts, so a microphone plugged
    in (or a sound server started) later is unseen until then. Close every open stream first."""
    sd = _sounddevice()
    sd._terminate()
    sd._initialize()


def level_of(block: np.ndarray) -> float:
    """Loudness of a block on a 0..1 scale: RMS in dBFS mapped linearly from -60 dB (0) to 0 dB (1)."""
    rms = float(np.sqrt(np.mean(np.square(block), dtype=np.float64))) if block.size else 0.0
    db = 20.0 * np.log10(max(rms, 1e-9))
    return min(max((db - _SILENCE_DB) / -_SILENCE_DB, 0.0), 1.0)


class Microphone:
    """An open input stream plus the take being recorded (if any) and the pre-roll before it."""

    def __init__(self, preroll_seconds: float = PREROLL_SECONDS):
        self._preroll_max = int(preroll_seconds * SAMPLE_RATE)
        self._lock = threading.Lock()
        self._preroll: deque[np.ndarray] = deque()
        self._preroll_len = 0
        self._take: list[np.ndarray] | None = None
        self._sink: Callable[[np.ndarray], None] | None = None
        self._stream = None
        self._resampler = None
        self._channels = 1
        self.device_name = ""
        self.level = 0.0  # written by the audio thread; a float store is atomic in CPython

    # ---- the stream ---------------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._stream is not None and self._stream.active

    def open(self, device_name: str = "") -> str:
        """Open ``device_name`` ("" = the system default) at its own rate; returns the device used.

        A named device that is no longer there falls back to the default (logged), so an unplugged
        headset doesn't leave the user without dictation.
        """
        sd = _sounddevice()
        self.close()
        device = self._find(sd, device_name)
        info = sd.query_devices(device, "input")
        rate = float(info["default_samplerate"])
        self._channels = 1
        try:
            stream = self._start_stream(sd, info["index"], rate, 1)
        except sd.PortAudioError:  # some devices refuse mono: take all channels and downmix
            self._channels = max(1, int(info["max_input_channels"]))
            try:
                stream = self._start_stream(sd, info["index"], rate, self._channels)
            except sd.PortAudioError as error:
                raise MicrophoneError(f"Can't open the microphone “{info['name']}”: {error}.") from error
        self._stream = stream
        self.device_name = info["name"]
        log.info("microphone: %s at %d Hz, %d channel(s)", info["name"], rate, self._channels)
        return self.device_name

    def _find(self, sd, device_name: str) -> int:
        try:
            devices = input_devices()
        except MicrophoneError:
            devices = []
        if not devices:
            raise MicrophoneError("No microphone found. Connect one, or check that PulseAudio or PipeWire is running.")
        for device in devices:
            if device.name == device_name:
                return device.index
        if device_name:
            log.warning("microphone: microphone %r is gone; using the default", device_name)
        return devices[0].index

    def _start_stream(self, sd, index: int, rate: float, channels: int):
        self._resampler = (
            soxr.ResampleStream(rate, SAMPLE_RATE, 1, dtype="float32") if int(rate) != SAMPLE_RATE else None
        )
        stream = sd.InputStream(
            device=index, samplerate=rate, channels=channels, dtype="float32", latency="low", callback=self._callback
        )
        stream.start()
        return stream

    def close(self) -> None:
        if self._stream is not None:
            try:
                self._stream.close()
            except Exception as error:  # a device that vanished can fail to close; it is gone either way
                log.warning("microphone: closing the stream failed: %s", error)
            self._stream = None
        self._resampler = None
        self.level = 0.0

    # ---- takes --------------------------------------------------------------------------------------

    @property
    def recording(self) -> bool:
        return self._take is not None

    def start_take(self, sink: Callable[[np.ndarray], None] | None = None) -> None:
        """Start a take with the pre-roll in it; ``sink`` then gets every 16 kHz block (pre-roll first)."""
        with self._lock:
            self._take = list(self._preroll)
            self._preroll.clear()
            self._preroll_len = 0
            self._sink = sink
            start = list(self._take)
        if sink is not None and start:
            sink(np.concatenate(start))

    def stop_take(self) -> np.ndarray:
        """End the take; returns its audio as 16 kHz mono float32 [n] (pre-roll included)."""
        with self._lock:
            take, self._take, self._sink = self._take or [], None, None
        return np.concatenate(take) if take else np.zeros(0, np.float32)

    def _callback(self, indata: np.ndarray, frames: int, time_info, status) -> None:
        if status:
            log.debug("microphone: %s", status)
        mono = indata[:, 0] if self._channels == 1 else indata.mean(axis=1, dtype=np.float32)
        self.level = level_of(mono)
        block = self._resampler.resample_chunk(mono) if self._resampler is not None else mono.copy()
        if not block.size:
            return
        with self._lock:
            sink = self._sink
            if self._take is not None:
                self._take.append(block)
            else:
                self._preroll.append(block)
                self._preroll_len += block.size
                while self._preroll_len - self._preroll[0].size >= self._preroll_max:
                    self._preroll_len -= self._preroll.popleft().size
        if sink is not None:
            sink(block)
