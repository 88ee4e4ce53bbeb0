"""Audio in and out: any audio or video file to 16 kHz mono float32, the format every model here takes.

libsndfile (soundfile) reads wav, flac, mp3, ogg and opus itself, quickly and without FFmpeg's quirks; the
rest (m4a/aac, the audio track of mp4/mkv/webm videos, ...) goes through PyAV's bundled FFmpeg. Stereo
and multichannel audio is downmixed by averaging the channels (the louder channel where they cancel);
soxr resamples.

Damaged files follow one rule whatever the container: a header that can't be true (a sample rate no
recording has, a sample size WAV doesn't have) is refused before anything is decoded; a file that ends
early, or has stretches that can't be decoded, gives what can be decoded, with a warning saying what is
missing (how many seconds, where the header says how long the file is); a file that changes while it is
read is refused (``engine.changes``, the model file's rule). Warnings go to the log and to the
caller's ``Warnings``, which the engine hands on with the transcript.
"""

from __future__ import annotations

import logging
import os
import stat
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import soundfile
import soxr

from sayso.engine.changes import changed_problem, identity
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


MIN_RATE, MAX_RATE = 1000, 768_000
"""Sample rates a recording can have (Hz). A header outside them is damaged: a rate of 1 would be resampled
sixteen-thousand-fold, gigabytes of samples from seconds of audio."""

MISSING_SECONDS = 0.5
"""Audio a file may lack against its header's length before a warning says it ends early: headers that
estimate the length (an MP3's bitrate) are off by a frame or two."""

CANCELLED_MIX = 0.01
"""Power of the channels' mean below which, against the channels' own power, they cancel each other out
(one channel inverted: the mix is silence, -20 dB or less); the louder channel is heard instead. Channels
that are merely unrelated keep at least 1/channels of it."""

DC_OFFSET = 0.01
"""A chunk's mean beyond which it sits on a constant offset (DC) that is taken off: voice detection heard
quiet speech on a large offset as no speech, and the first words went. Speech averages far below it over
seconds."""


class Warnings(list):
    """What was repaired in one audio, or is missing from it, each said once: logged as it is found and kept
    (a list of lines) for the transcript (``Transcript.warnings``)."""

    def __call__(self, message: str) -> None:
        if message not in self:
            self.append(message)
            log.warning("%s", message)


FAR_BEYOND_FULL_SCALE = 1000.0
"""Samples this far beyond full scale (60 dB) are not audio scaled as audio (a float file written
without normalising): clipping them would leave a square wave, so they are refused."""


def sanitized(pcm: np.ndarray, source: str = "the audio", warn: Warnings | None = None) -> np.ndarray:
    """``pcm`` (float32) as a model may hear it: samples that aren't numbers (NaN, infinity; a damaged
    float file) become silence, samples over full scale are clipped to it, with a warning each
    (``warn``); samples far beyond full scale raise AudioError. Sample by sample, so chunks of any size
    give the same result.
    """
    warn = Warnings() if warn is None else warn
    finite = np.isfinite(pcm)
    if not finite.all():
        warn(f"{source}: {pcm.size - int(finite.sum())} samples are not numbers (NaN or infinity); "
             "they are heard as silence.")
        pcm = np.where(finite, pcm, np.float32(0))
    peak = float(np.abs(pcm).max()) if pcm.size else 0.0
    if peak > FAR_BEYOND_FULL_SCALE:
        raise AudioError(source, f"its samples reach {peak:.3g}, far beyond full scale (1.0), so it isn't audio as "
                         "recorded", "Normalise it first (for example `sox IN -b 16 OUT gain -n`) and try again.")
    if peak > 1.0:
        warn(f"{source}: samples up to {peak:.3g} are over full scale (1.0); they are clipped.")
        pcm = np.clip(pcm, -1.0, 1.0)
    return pcm


def _without_dc(pcm: np.ndarray, source: str, warn: Warnings) -> np.ndarray:
    """``pcm`` (a chunk of a file) less the mean of its numbers where that is beyond ``DC_OFFSET``, with a
    warning."""
    offset = float(pcm.mean(dtype=np.float64)) if pcm.size else 0.0
    if not np.isfinite(offset):  # NaN or infinity among the samples: ``sanitized`` silences them
        finite = pcm[np.isfinite(pcm)]
        offset = float(finite.mean(dtype=np.float64)) if finite.size else 0.0
    if abs(offset) <= DC_OFFSET:
        return pcm
    warn(f"{source}: its samples sit on a constant offset (DC), which is taken off before it is transcribed.")
    return pcm - np.float32(offset)


def load_audio(path, warn: Warnings | None = None) -> np.ndarray:
    """The whole file as 16 kHz mono float32 [n] (an empty array if it holds no samples)."""
    path = _existing_file(path)
    warn = Warnings() if warn is None else warn
    try:
        sound = soundfile.SoundFile(path)
    except soundfile.SoundFileError:  # not a format libsndfile knows: let FFmpeg try
        chunks = list(stream_audio(path, warn=warn))
        return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    with sound:
        _check_header(path, sound)
        data, rate = sound.read(dtype="float32", always_2d=True), sound.samplerate
    mono = _mono(data, path, warn)
    if rate != SAMPLE_RATE and mono.size:
        mono = soxr.resample(mono, rate, SAMPLE_RATE)
    return np.ascontiguousarray(mono, dtype=np.float32)


def stream_audio(path, chunk_seconds: float = 30.0, warn: Warnings | None = None) -> Iterator[np.ndarray]:
    """Yield the file as 16 kHz mono float32 chunks of ``chunk_seconds`` (the last one shorter), each less
    any constant offset (``DC_OFFSET``); what is repaired or missing goes to ``warn``.

    Decodes and resamples as it goes (libsndfile for the formats it reads, as ``load_audio`` does, else
    PyAV; soxr's streaming resampler), so memory stays at about one chunk whatever the file's length.
    """
    path = _existing_file(path)
    warn = Warnings() if warn is None else warn
    chunk = max(1, round(chunk_seconds * SAMPLE_RATE))
    pending: list[np.ndarray] = []
    n_pending = 0
    for pcm in _decoded_pieces(path, warn):
        pending.append(pcm)
        n_pending += pcm.shape[0]
        if n_pending >= chunk:
            joined = np.concatenate(pending)
            n_full = n_pending // chunk * chunk
            for part in np.split(joined[:n_full], n_full // chunk):
                yield _without_dc(part, path, warn)
            pending, n_pending = [joined[n_full:]], n_pending - n_full
    if n_pending:
        yield _without_dc(np.concatenate(pending), path, warn)


SNDFILE_BLOCK = SAMPLE_RATE  # frames libsndfile reads at a time


def _decoded_pieces(path: str, warn: Warnings) -> Iterator[np.ndarray]:
    """The file as 16 kHz mono float32 pieces: WAV through libsndfile (no FFmpeg loaded: plain samples,
    nothing to lose sync on), everything else through FFmpeg, which decodes past a damaged stretch."""
    opened = identity(os.stat(path))
    try:
        sound = soundfile.SoundFile(path)
    except soundfile.SoundFileError:
        sound = None
    if sound is None or sound.format not in ("WAV", "WAVEX"):
        if sound is not None:
            sound.close()
        with _open_audio(path) as (container, stream):
            if stream.codec_context.sample_rate:  # 0: the container doesn't say; each frame's is checked
                _check_rate(path, stream.codec_context.sample_rate)
            pieces = ((frame.sample_rate, _frame_to_mono(frame, path, warn))
                      for frame in _decoded(path, container, stream, warn))
            yield from _to_16k(path, _counted(path, opened, pieces, _stream_seconds(container, stream), warn))
        return
    with sound:
        expected = _check_header(path, sound)
        blocks = sound.blocks(SNDFILE_BLOCK, dtype="float32", always_2d=True)
        pieces = ((sound.samplerate, _mono(block, path, warn)) for block in blocks)
        yield from _to_16k(path, _counted(path, opened, pieces, expected, warn))


def _counted(path: str, opened: tuple[int, ...], pieces: Iterator[tuple[int, np.ndarray]], expected: float | None,
             warn: Warnings) -> Iterator[tuple[int, np.ndarray]]:
    """``pieces`` (rate, samples) of the file at ``path`` whose ``identity`` was ``opened``, each once the
    file is seen unchanged; at their end, a warning where they fall short of the ``expected`` seconds."""
    seconds = 0.0
    for rate, mono in pieces:
        _check_unchanged(path, opened)
        seconds += len(mono) / rate
        yield rate, mono
    _check_unchanged(path, opened)
    if expected is not None and expected - seconds > MISSING_SECONDS:
        warn(f"{path}: ends early: its header says {expected:.1f} s, only {seconds:.1f} s could be decoded "
             "(the file is cut short or damaged); what is there is transcribed.")


def _check_unchanged(path: str, opened: tuple[int, ...]) -> None:
    """AudioError unless the file at ``path`` is still the one of ``opened`` (``changes.identity``): a file
    cut short or rewritten under its decoder gives samples of neither version."""
    try:
        now = os.stat(path)
    except OSError as error:
        raise AudioError(path, f"can't be read any more ({error.strerror})", _CHANGED_HINT) from None
    if identity(now) != opened:
        raise AudioError(path, changed_problem(opened[2], now.st_size), _CHANGED_HINT)


_CHANGED_HINT = "Wait until whatever writes it has finished, then transcribe it again."


def _check_rate(path: str, rate: int) -> None:
    if not MIN_RATE <= rate <= MAX_RATE:
        raise AudioError(path, f"its header says {rate} samples a second, which no recording has "
                         f"({MIN_RATE} to {MAX_RATE} are), so the header is damaged", _REPAIR_HINT)


_REPAIR_HINT = "Export it again from the recording, or repair its header (for example with ffmpeg -i IN OUT.wav)."

_WAV_PCM, _WAV_FLOAT, _WAV_EXTENSIBLE = 1, 3, 0xFFFE
_WAV_SAMPLE_BITS = {_WAV_PCM: (8, 16, 24, 32), _WAV_FLOAT: (32, 64)}
"""The sample sizes WAV has for plain integers and floats; other codings (A-law, ADPCM...) libsndfile checks."""
_WAV_HEADER_BYTES = 64 * 1024  # where a WAV's fmt and data chunks begin, after any metadata before them


def _check_header(path: str, sound: soundfile.SoundFile) -> float | None:
    """AudioError where the header of the file libsndfile opened can't be true (its rate; for a WAV, its
    sample size and block size); else the seconds a WAV's header says it holds (None where it doesn't:
    another format, or a stream written without its length)."""
    _check_rate(path, sound.samplerate)
    if sound.format not in ("WAV", "WAVEX"):
        return None
    with open(path, "rb") as f:
        head = f.read(_WAV_HEADER_BYTES)
    fmt, data_bytes = _wav_chunks(head)
    if fmt is None or len(fmt) < 16:
        return None
    coding, channels, _, _, block, bits = struct.unpack_from("<HHIIHH", fmt)
    if coding == _WAV_EXTENSIBLE and len(fmt) >= 26:
        coding = struct.unpack_from("<H", fmt, 24)[0]  # the sub-format GUID begins with the coding
    if coding in _WAV_SAMPLE_BITS and (bits not in _WAV_SAMPLE_BITS[coding] or block != channels * bits // 8):
        kind = "integer" if coding == _WAV_PCM else "float"
        raise AudioError(path, f"its header says {bits}-bit {kind} samples in blocks of {block} bytes for "
                         f"{channels} channel(s), which WAV doesn't have, so the header is damaged", _REPAIR_HINT)
    if data_bytes in (None, 0, 0xFFFFFFFF) or not block:  # a stream's writer leaves the length unsaid
        return None
    return data_bytes / block / sound.samplerate


def _wav_chunks(head: bytes) -> tuple[bytes | None, int | None]:
    """A RIFF/WAVE file's first bytes: its fmt chunk's bytes and its data chunk's declared size (each None
    when not among them)."""
    fmt = data_bytes = None
    at = 12
    while at + 8 <= len(head) and data_bytes is None:
        name, size = head[at : at + 4], struct.unpack_from("<I", head, at + 4)[0]
        if name == b"fmt ":
            fmt = head[at + 8 : at + 8 + size]
        elif name == b"data":
            data_bytes = size
        at += 8 + size + (size & 1)
    return fmt, data_bytes


def _stream_seconds(container, stream) -> float | None:
    """The audio stream's length by its container's header (None where it doesn't say)."""
    import av

    if stream.duration is not None:
        return float(stream.duration * stream.time_base)
    return container.duration / av.time_base if container.duration is not None else None


def _mono(samples: np.ndarray, source: str, warn: Warnings) -> np.ndarray:
    """float32 samples [n, channels] from libsndfile as mono [n], contiguous: the channels' mean
    (``_kept_in_mix``)."""
    if samples.shape[1] == 1:
        return np.ascontiguousarray(samples[:, 0])
    return _kept_in_mix(samples.T, samples.mean(axis=1, dtype=np.float32), source, warn)


def _kept_in_mix(channels: np.ndarray, mixed: np.ndarray, source: str, warn: Warnings) -> np.ndarray:
    """``mixed``, the mean of ``channels`` [channels, n], unless the channels cancel each other out in it
    (``CANCELLED_MIX``: one of them inverted); then the loudest channel alone, with a warning."""
    power = np.einsum("cn,cn->c", channels, channels, dtype=np.float64)
    mixed_power = float(np.dot(mixed, mixed)) * len(channels)  # the mean's, against the channels' mean power
    if not power.any() or mixed_power >= CANCELLED_MIX * float(power.sum()):
        return mixed
    warn(f"{source}: its channels cancel each other out when mixed (one is inverted), so only the louder "
         "one is transcribed.")
    return np.ascontiguousarray(channels[int(power.argmax())], dtype=mixed.dtype)


def duration(path) -> float:
    """Length in seconds, read from the file's header; nothing is decoded."""
    path = _existing_file(path)
    try:
        return soundfile.info(path).duration
    except soundfile.SoundFileError:
        pass
    with _open_audio(path) as (container, stream):
        seconds = _stream_seconds(container, stream)
    if seconds is not None:
        return seconds
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
        if container.streams.audio[0].codec_context is None:  # a header FFmpeg has no decoder for (no channels)
            raise AudioError(path, "isn't audio or video that FFmpeg can read")
        yield container, container.streams.audio[0]


def _to_16k(path: str, pieces: Iterator[tuple[int, np.ndarray]]) -> Iterator[np.ndarray]:
    """Mono float32 pieces, each with its sample rate, as 16 kHz pieces through soxr's streaming
    resampler: a new one where the rate changes (the first piece, or a stream that changes midway)."""
    resampler = None
    rate = None
    for piece_rate, mono in pieces:
        if piece_rate != rate:
            _check_rate(path, piece_rate)
            if resampler is not None:
                yield resampler.resample_chunk(np.zeros(0, np.float32), last=True)
            rate = piece_rate
            resampler = soxr.ResampleStream(rate, SAMPLE_RATE, 1, dtype="float32") if rate != SAMPLE_RATE else None
        yield resampler.resample_chunk(mono) if resampler is not None else mono
    if resampler is not None:
        yield resampler.resample_chunk(np.zeros(0, np.float32), last=True)


def _decoded(path: str, container, stream, warn: Warnings):
    """The stream's decoded frames. A packet that can't be decoded is left out, and the container's end
    where it can't be read on (a file cut short), with a warning; AudioError where more packets are damaged
    than not (it isn't this kind of audio at all)."""
    import av

    good = damaged = 0
    try:
        for packet in container.demux(stream):
            try:
                frames = packet.decode()
            except av.error.FFmpegError as error:
                damaged += 1
                problem = error.strerror
                continue
            good += bool(frames)  # the end's empty packet (the decoder's flush) counts for nothing
            yield from frames
    except av.error.FFmpegError as error:  # the container can't be read on
        damaged += 1
        problem = error.strerror
    if damaged > good:
        raise AudioError(path, f"the audio is damaged and can't be decoded ({problem})")
    if damaged:
        warn(f"{path}: {damaged} damaged stretch(es) can't be decoded ({problem}) and are left out.")


def _frame_samples(frame, channels: int) -> np.ndarray:
    """The frame's samples as PyAV lays them out ([planes, values]). PyAV has no array for 64-bit integer samples
    (a WAV may hold them), so those are read from the planes' bytes."""
    if frame.format.name not in ("s64", "s64p"):
        return frame.to_ndarray()
    per_plane = frame.samples * (1 if frame.format.is_planar else channels)
    return np.stack([np.frombuffer(plane, dtype="<i8", count=per_plane) for plane in frame.planes])


def _frame_to_mono(frame, source: str, warn: Warnings) -> np.ndarray:
    """One decoded frame (any sample format, planar or packed) as mono float32 [samples]."""
    channels = len(frame.layout.channels)
    samples = _frame_samples(frame, channels)
    if not frame.format.is_planar:  # packed: one row of interleaved samples
        samples = samples.reshape(-1, channels).T
    if samples.dtype == np.uint8:
        samples = (samples.astype(np.float32) - 128.0) / 128.0
    elif samples.dtype in _INTEGER_FULL_SCALE:
        samples = samples / _INTEGER_FULL_SCALE[samples.dtype]
    if channels == 1:
        return np.ascontiguousarray(samples[0], dtype=np.float32)
    return _kept_in_mix(samples, np.ascontiguousarray(samples.mean(axis=0), dtype=np.float32), source, warn)
