"""Audio in and out: any audio or video file to 16 kHz mono float32, the format every model here takes.

libsndfile (soundfile) reads wav, flac, mp3, ogg and opus itself, quickly and without FFmpeg's quirks; the
rest (m4a/aac, the audio track of mp4/mkv/webm videos, ...) goes through PyAV's bundled FFmpeg. Stereo
and multichannel audio is downmixed by averaging the channels; soxr resamples.
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import soundfile
import soxr

from sayso.engine.errors import AudioError

log = logging.getLogger(__name__)

SAMPLE_RATE = 16000
_MISSING_HINT = "Check the path."
_WRITE_HINT = "Check that the folder exists, is writable, and that the disk isn't full."

MEDIA_SUFFIXES = {
    ".wav", ".flac", ".mp3", ".ogg", ".oga", ".opus", ".m4a", ".aac", ".wma", ".aiff", ".aif", ".webm",
    ".mp4", ".m4v", ".mkv", ".mov", ".avi", ".mpg", ".mpeg", ".3gp", ".amr",
}  # fmt: skip
"""The extensions of the audio and video files a folder contributes (the Files page, ``sayso transcribe
DIR``): those soundfile or FFmpeg decode; other files in a folder (covers, notes) are not audio."""

# Full scale of integer sample formats, so that decoded integers map to [-1, 1) as float.
_INTEGER_FULL_SCALE = {np.dtype(np.int16): 2.0**15, np.dtype(np.int32): 2.0**31, np.dtype(np.int64): 2.0**63}


FAR_BEYOND_FULL_SCALE = 1000.0
"""Samples this far beyond full scale (60 dB) are not audio scaled as audio (a float file written
without normalising): clipping them would leave a square wave, so they are refused."""


def sanitized(pcm: np.ndarray, source: str = "the audio") -> np.ndarray:
    """``pcm`` (float32) as a model may hear it: samples that aren't numbers (NaN, infinity; a damaged
    float file) become silence, samples over full scale are clipped to it, with a warning each; samples
    far beyond full scale raise AudioError. Sample by sample, so chunks of any size give the same result.
    """
    finite = np.isfinite(pcm)
    if not finite.all():
        log.warning("%s: %d samples are not numbers (NaN or infinity); they are heard as silence.",
                    source, pcm.size - int(finite.sum()))
        pcm = np.where(finite, pcm, np.float32(0))
    peak = float(np.abs(pcm).max()) if pcm.size else 0.0
    if peak > FAR_BEYOND_FULL_SCALE:
        raise AudioError(source, f"its samples reach {peak:.3g}, far beyond full scale (1.0), so it isn't audio as "
                         "recorded", "Normalise it first (for example `sox IN -b 16 OUT gain -n`) and try again.")
    if peak > 1.0:
        log.warning("%s: samples up to %.3g are over full scale (1.0); they are clipped.", source, peak)
        pcm = np.clip(pcm, -1.0, 1.0)
    return pcm


def load_audio(path) -> np.ndarray:
    """The whole file as 16 kHz mono float32 [n] (an empty array if it holds no samples)."""
    path = _existing_file(path)
    try:
        data, rate = soundfile.read(path, dtype="float32", always_2d=True)
    except soundfile.SoundFileError:  # not a format libsndfile knows: let FFmpeg try
        chunks = list(stream_audio(path))
        return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    mono = _mono(data)
    if rate != SAMPLE_RATE and mono.size:
        mono = soxr.resample(mono, rate, SAMPLE_RATE)
    return np.ascontiguousarray(mono, dtype=np.float32)


def stream_audio(path, chunk_seconds: float = 30.0) -> Iterator[np.ndarray]:
    """Yield the file as 16 kHz mono float32 chunks of ``chunk_seconds`` (the last one shorter).

    Decodes and resamples as it goes (libsndfile for the formats it reads, as ``load_audio`` does, else
    PyAV; soxr's streaming resampler), so memory stays at about one chunk whatever the file's length.
    """
    path = _existing_file(path)
    chunk = max(1, round(chunk_seconds * SAMPLE_RATE))
    pending: list[np.ndarray] = []
    n_pending = 0
    for pcm in _decoded_pieces(path):
        pending.append(pcm)
        n_pending += pcm.shape[0]
        if n_pending >= chunk:
            joined = np.concatenate(pending)
            n_full = n_pending // chunk * chunk
            yield from np.split(joined[:n_full], n_full // chunk)
            pending, n_pending = [joined[n_full:]], n_pending - n_full
    if n_pending:
        yield np.concatenate(pending)


SNDFILE_BLOCK = SAMPLE_RATE  # frames libsndfile reads at a time


def _decoded_pieces(path: str) -> Iterator[np.ndarray]:
    """The file as 16 kHz mono float32 pieces: WAV through libsndfile (no FFmpeg loaded: plain samples,
    nothing to lose sync on), everything else through FFmpeg, which decodes past a damaged stretch."""
    try:
        sound = soundfile.SoundFile(path)
    except soundfile.SoundFileError:
        sound = None
    if sound is None or sound.format not in ("WAV", "WAVEX"):
        if sound is not None:
            sound.close()
        with _open_audio(path) as (container, stream):
            yield from _resampled(path, container, stream)
        return
    with sound:
        blocks = sound.blocks(SNDFILE_BLOCK, dtype="float32", always_2d=True)
        yield from _to_16k((sound.samplerate, _mono(block)) for block in blocks)


def _mono(samples: np.ndarray) -> np.ndarray:
    """float32 samples [n, channels] from libsndfile as mono [n], contiguous: the channels' mean."""
    return samples.mean(axis=1, dtype=np.float32) if samples.shape[1] > 1 else np.ascontiguousarray(samples[:, 0])


def duration(path) -> float:
    """Length in seconds, read from the file's header; nothing is decoded."""
    path = _existing_file(path)
    try:
        return soundfile.info(path).duration
    except soundfile.SoundFileError:
        pass
    import av  # FFmpeg is loaded only for files libsndfile can't read

    with _open_audio(path) as (container, stream):
        if stream.duration is not None:
            return float(stream.duration * stream.time_base)
        if container.duration is not None:
            return container.duration / av.time_base
    raise AudioError(path, "the file doesn't say how long it is", "Convert it to wav or flac.")


def save_wav(path, pcm16k: np.ndarray) -> None:
    """Write 16 kHz mono float audio [n] as a 16-bit PCM wav file (samples beyond ±1 are clipped)."""
    pcm = np.clip(np.asarray(pcm16k, dtype=np.float32), -1.0, 1.0)
    try:
        soundfile.write(str(path), pcm, SAMPLE_RATE, subtype="PCM_16", format="WAV")
    except (soundfile.SoundFileError, OSError) as error:
        raise AudioError(path, f"can't write the wav file ({error})", _WRITE_HINT) from error


def _existing_file(path) -> str:
    """``path`` as a string once it is a regular, non-empty file; else AudioError saying what it is."""
    p = Path(path)
    try:
        info = p.stat()
    except FileNotFoundError:
        if p.is_symlink():
            raise AudioError(path, "is a link to a file that doesn't exist", _MISSING_HINT) from None
        raise AudioError(path, "no such file", _MISSING_HINT) from None
    except OSError as error:  # a loop of links, a name too long, a folder we may not enter
        raise AudioError(path, f"can't be reached ({error.strerror})", _MISSING_HINT) from None
    if stat.S_ISDIR(info.st_mode):
        raise AudioError(path, "is a folder, not a file", _MISSING_HINT)
    if not stat.S_ISREG(info.st_mode):
        kind = _SPECIAL_FILES.get(stat.S_IFMT(info.st_mode), "a special file")
        raise AudioError(path, f"is {kind}, not an audio file", "Save the audio to a file and give that file's path.")
    if info.st_size == 0:  # FFmpeg would only say it can't read it
        raise AudioError(path, "is empty (0 bytes)", "Record or export it again.")
    return str(p)


_SPECIAL_FILES = {stat.S_IFIFO: "a pipe (FIFO)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
                  stat.S_IFSOCK: "a socket"}


@contextmanager
def _open_audio(path: str):
    """Open ``path`` with FFmpeg; yield (container, its first audio stream) or raise AudioError."""
    import av

    try:
        container = av.open(path)
    except av.error.InvalidDataError as error:
        raise AudioError(path, "isn't audio or video that FFmpeg can read") from error
    except av.error.FFmpegError as error:
        raise AudioError(path, f"can't be opened ({error.strerror})") from error
    with container:
        if not container.streams.audio:
            raise AudioError(path, "has no audio track", "Pick a file with sound in it.")
        yield container, container.streams.audio[0]


def _resampled(path: str, container, stream) -> Iterator[np.ndarray]:
    """The stream's audio as 16 kHz mono float32 pieces, one per decoded frame (some empty)."""
    yield from _to_16k((frame.sample_rate, _frame_to_mono(frame)) for frame in _decoded(path, container, stream))


def _to_16k(pieces: Iterator[tuple[int, np.ndarray]]) -> Iterator[np.ndarray]:
    """Mono float32 pieces, each with its sample rate, as 16 kHz pieces through soxr's streaming
    resampler: a new one where the rate changes (the first piece, or a stream that changes midway)."""
    resampler = None
    rate = None
    for piece_rate, mono in pieces:
        if piece_rate != rate:
            if resampler is not None:
                yield resampler.resample_chunk(np.zeros(0, np.float32), last=True)
            rate = piece_rate
            resampler = soxr.ResampleStream(rate, SAMPLE_RATE, 1, dtype="float32") if rate != SAMPLE_RATE else None
        yield resampler.resample_chunk(mono) if resampler is not None else mono
    if resampler is not None:
        yield resampler.resample_chunk(np.zeros(0, np.float32), last=True)


def _decoded(path: str, container, stream):
    import av

    try:
        yield from container.decode(stream)
    except av.error.FFmpegError as error:
        raise AudioError(path, f"the audio is damaged and can't be decoded ({error.strerror})") from error


def _frame_to_mono(frame) -> np.ndarray:
    """One decoded frame (any sample format, planar or packed) as mono float32 [samples]."""
    samples = frame.to_ndarray()
    channels = len(frame.layout.channels)
    if not frame.format.is_planar:  # packed: one row of interleaved samples
        samples = samples.reshape(-1, channels).T
    if samples.dtype == np.uint8:
        samples = (samples.astype(np.float32) - 128.0) / 128.0
    elif samples.dtype in _INTEGER_FULL_SCALE:
        samples = samples / _INTEGER_FULL_SCALE[samples.dtype]
    mono = samples.mean(axis=0) if channels > 1 else samples[0]
    return np.ascontiguousarray(mono, dtype=np.float32)
