"""The microphone: a real PulseAudio source (a null sink's monitor) recorded through PortAudio."""

import os
import subprocess
import threading
import time

import numpy as np
import soundfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from sayso.app.platform.cues import CuePlayer  # noqa: E402
from sayso.app.platform.microphone import Microphone, level_of, rescan_devices  # noqa: E402
from e2e.fixtures import pulse  # noqa: E402, F401

from support.data import AUDIO  # noqa: E402

JFK = AUDIO / "jfk.wav"


def test_level_scale():
    square = np.where(np.arange(1600) % 20 < 10, 1.0, -1.0).astype(np.float32)  # RMS = peak
    assert level_of(np.zeros(1600, np.float32)) == 0.0
    assert level_of(np.zeros(0, np.float32)) == 0.0
    assert abs(level_of(square) - 1.0) < 1e-6  # full scale: 0 dBFS
    assert abs(level_of(10 ** (-30 / 20) * square) - 0.5) < 1e-6  # -30 dBFS is half way up the meter


def _offset_and_correlation(take: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """Where ``take`` starts in ``reference`` (seconds) and how well they match there (Pearson r)."""
    n = 1 << int(np.ceil(np.log2(len(take) + len(reference))))
    spectrum = np.fft.rfft(reference, n) * np.conj(np.fft.rfft(take, n))
    lag = int(np.argmax(np.fft.irfft(spectrum, n)[: len(reference)]))
    overlap = min(len(take), len(reference) - lag)
    r = np.corrcoef(take[:overlap], reference[lag : lag + overlap])[0, 1]
    return lag / 16000, float(r)


def test_records_what_is_played_with_half_a_second_before_the_key(pulse):
    rescan_devices()  # PortAudio lists devices once; the sound server may have started after that
    microphone = Microphone()
    name = microphone.open("")
    assert microphone.is_open and name
    reference, _ = soundfile.read(JFK, dtype="float32")
    blocks, levels = [], []
    try:
        time.sleep(0.5)
        player = subprocess.Popen(["paplay", "--device=vsink", str(JFK)], env={**os.environ, **pulse.env})
        time.sleep(2.5)  # the "key" goes down 2.5 s into the speech
        microphone.start_take(blocks.append)
        stop = threading.Event()
        sampler = threading.Thread(
            target=lambda: [levels.append(microphone.level) or time.sleep(0.05) for _ in iter(stop.is_set, True)]
        )
        sampler.start()
        time.sleep(5.0)
        pcm = microphone.stop_take()
        stop.set()
        sampler.join()
        player.wait(timeout=30)
    finally:
        microphone.close()
    assert not microphone.is_open
    assert np.array_equal(np.concatenate(blocks), pcm)  # the sink saw every sample of the take, in order
    assert 5.4 <= len(pcm) / 16000 <= 5.8  # 5 s held + the 0.5 s pre-roll
    offset, r = _offset_and_correlation(pcm, reference)
    assert r > 0.95
    # The take begins about 0.5 s before the key went down (2.5 s in), give or take the devices' latency.
    assert 1.7 <= offset <= 2.2, offset
    assert max(levels) > 0.5


def test_a_missing_microphone_falls_back_to_the_default(pulse):
    rescan_devices()
    microphone = Microphone()
    try:
        assert microphone.open("USB microphone that was unplugged") != "USB microphone that was unplugged"
        assert microphone.is_open
    finally:
        microphone.close()


def test_sound_cues_play_on_the_default_output(pulse):
    """The start cue, played on the default output (the null sink), reaches the microphone intact."""
    rescan_devices()
    microphone = Microphone()
    microphone.open("")
    try:
        time.sleep(0.3)
        microphone.start_take()
        cues = CuePlayer()
        cues.play("start").join(10)
        time.sleep(0.4)
        pcm = microphone.stop_take()
    finally:
        microphone.close()
    cue, rate = cues.sound("start")
    assert 0.1 < len(cue) / rate < 0.3
    import soxr

    _, r = _offset_and_correlation(soxr.resample(cue, rate, 16000), pcm)  # where the cue is in the recording
    assert r > 0.9
