"""Audio that lies about itself, is cut short, changes while it is read, or mixes to silence: one rule for
every container (``engine.audio``). A header that can't be true is refused before anything is decoded; a
file that ends early or holds damaged stretches gives what decodes and a warning saying what is missing,
on the transcript too; a file that changes while it is read is refused; channels that cancel in the mix,
and a constant offset, are repaired with a warning. The property test at the end feeds the command line
WAV headers and cuts of every kind. Whisper tiny.en on numpy, on jfk.wav transformed.
"""

from __future__ import annotations

import contextlib
import io
import resource
import struct
import threading

import numpy as np
import pytest
import soundfile

from support.data import AUDIO
from support.texts import JFK_WORDS, words
from sayso.engine.audio import Warnings, load_audio, stream_audio
from sayso.engine.errors import AudioError

JFK = AUDIO / "jfk.wav"


@pytest.fixture(scope="module")
def jfk() -> np.ndarray:
    return soundfile.read(JFK, dtype="float32")[0]


def with_fmt(wav: bytes, **fields: int) -> bytes:
    """``wav`` with fields of its fmt chunk replaced: ``channels``, ``rate``, ``block``, ``bits``."""
    data = bytearray(wav)
    at = data.find(b"fmt ") + 8
    for name, (offset, kind) in {"channels": (2, "<H"), "rate": (4, "<I"), "block": (12, "<H"),
                                 "bits": (14, "<H")}.items():
        if name in fields:
            struct.pack_into(kind, data, at + offset, fields[name])
    return bytes(data)


def decoded(path) -> tuple[np.ndarray, Warnings]:
    warnings = Warnings()
    chunks = list(stream_audio(path, warn=warnings))
    return (np.concatenate(chunks) if chunks else np.zeros(0, np.float32)), warnings


# ---- headers that can't be true -------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "problem"), [
    ({"rate": 1}, "says 1 samples a second"),  # was resampled 16,000-fold: 4.4 GB and no end in sight
    ({"rate": 999}, "says 999 samples a second"),
    ({"rate": 1_000_000}, "says 1000000 samples a second"),
    ({"bits": 7}, "7-bit integer samples"),  # was read as 8-bit: twice the length and no text
    ({"bits": 16, "block": 3}, "in blocks of 3 bytes"),
])
def test_a_header_that_cant_be_true_is_refused_before_decoding(tmp_path, fields, problem):
    path = tmp_path / "lying.wav"
    path.write_bytes(with_fmt(JFK.read_bytes(), **fields))
    for read in (load_audio, lambda p: list(stream_audio(p))):
        with pytest.raises(AudioError, match=problem) as error:
            read(path)
        assert "header is damaged" in str(error.value) and error.value.path == str(path)


# ---- cut short or damaged: what decodes, and a warning saying what is missing -------------------------


def cut(tmp_path, name: str, data: bytes) -> object:
    path = tmp_path / name
    path.write_bytes(data[: len(data) // 2])
    return path


@pytest.mark.parametrize("container", ["WAV", "FLAC", "MP3"])
def test_half_a_file_gives_its_half_and_says_what_is_missing(tmp_path, jfk, container):
    """A header that says 11 s over 5.5 s of audio: every container the same way (half a FLAC failed
    whole, half a WAV or MP3 was half a transcript without a word of warning)."""
    whole = tmp_path / f"whole.{container.lower()}"
    if container == "MP3":
        whole.write_bytes((AUDIO / "jfk.mp3").read_bytes())
    else:
        soundfile.write(whole, jfk, 16000, format=container)
    pcm, warnings = decoded(cut(tmp_path, f"half.{container.lower()}", whole.read_bytes()))
    assert 4.5 * 16000 < len(pcm) < 6 * 16000
    assert any("ends early: its header says 11.0 s, only 5." in line for line in warnings), warnings


def test_half_an_ogg_decodes_to_its_end(tmp_path, jfk):
    """Ogg's length is its last page's: half a file says 5 s and holds them, so there is nothing to say."""
    soundfile.write(tmp_path / "whole.ogg", jfk, 16000)
    pcm, warnings = decoded(cut(tmp_path, "half.ogg", (tmp_path / "whole.ogg").read_bytes()))
    assert 4 * 16000 < len(pcm) < 6 * 16000 and not warnings


def test_garbage_inside_an_mp3_is_left_out_with_a_warning(engine, tmp_path):
    data = bytearray((AUDIO / "jfk.mp3").read_bytes())
    middle = len(data) // 2
    data[middle : middle + 4000] = np.random.default_rng(7).integers(0, 256, 4000, dtype=np.uint8).tobytes()
    (tmp_path / "garbage.mp3").write_bytes(bytes(data))  # failed whole
    transcript = engine.transcribe_file(tmp_path / "garbage.mp3")
    assert words(transcript.text).startswith("and so my fellow americans ask not")
    assert words(transcript.text).endswith("ask what you can do for your country")
    assert any("damaged stretch(es) can't be decoded" in line for line in transcript.warnings), transcript.warnings


def test_a_wav_cut_short_is_transcribed_with_the_warning_on_its_transcript(engine, tmp_path):
    transcript = engine.transcribe_file(cut(tmp_path, "half.wav", JFK.read_bytes()))
    assert words(transcript.text).startswith("and so my fellow americans")
    assert "country can do" not in words(transcript.text)
    assert transcript.warnings == [f"{tmp_path / 'half.wav'}: ends early: its header says 11.0 s, only 5.5 s could be "
                                   "decoded (the file is cut short or damaged); what is there is transcribed."]


# ---- a file that changes while it is read -----------------------------------------------------------


def test_an_audio_file_cut_short_while_it_is_read_is_refused(tmp_path, jfk):
    path = tmp_path / "growing.wav"
    soundfile.write(path, np.tile(jfk, 3), 16000)
    chunks = stream_audio(path, chunk_seconds=1.0)
    next(chunks)
    size = path.stat().st_size
    with open(path, "r+b") as f:  # what `cp other.wav growing.wav` does first
        f.truncate(size // 2)
    with pytest.raises(AudioError, match=rf"changed while it was being read \(it was {size} bytes, is {size // 2} now\)"):
        list(chunks)


def test_a_file_changed_during_its_transcription_fails_it(engine, tmp_path, jfk):
    """Cut short after its first window was transcribed: an error, never 'the crack the crack...' with exit 0."""
    path = tmp_path / "long.flac"
    soundfile.write(path, np.tile(jfk, 4), 16000)
    data = path.read_bytes()

    def cut_once(fraction: float) -> None:
        if fraction < 1 and path.stat().st_size == len(data):
            path.write_bytes(data[: len(data) // 3])

    with pytest.raises(AudioError, match="changed while it was being read") as error:
        engine.transcribe_file(path, progress=cut_once)
    assert "transcribe it again" in str(error.value)


# ---- channels that cancel, a constant offset --------------------------------------------------------


def test_a_channel_in_opposite_phase_doesnt_cancel_the_speech(engine, tmp_path, jfk):
    soundfile.write(tmp_path / "inverted.wav", np.stack([jfk, -jfk], axis=1), 16000)  # the mean was silence
    transcript = engine.transcribe_file(tmp_path / "inverted.wav")
    assert words(transcript.text) == JFK_WORDS
    assert any("channels cancel each other out" in line for line in transcript.warnings)
    soundfile.write(tmp_path / "half_level.wav", np.stack([jfk, 0.5 * jfk], axis=1), 16000)
    assert engine.transcribe_file(tmp_path / "half_level.wav").warnings == []  # an ordinary stereo file is mixed


def test_a_constant_offset_is_taken_off_before_voice_detection(engine, tmp_path, jfk):
    """Quiet speech on a 0.85 offset: voice detection heard the first words as none."""
    soundfile.write(tmp_path / "offset.wav", 0.1 * jfk + 0.85, 16000, subtype="FLOAT")
    transcript = engine.transcribe_file(tmp_path / "offset.wav")
    assert words(transcript.text) == JFK_WORDS
    assert any("constant offset (DC)" in line for line in transcript.warnings)


# ---- the property: any WAV header or cut gives text or one clear line, in bounded time and memory -----


@pytest.fixture(scope="module")
def cli(engine, tmp_path_factory):
    """``app.cli.main`` in this process, on the module's engine."""
    from sayso.app import cli

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli, "_engine", lambda args: engine)
        patch.setenv("SAYSO_DATA_DIR", str(tmp_path_factory.mktemp("data")))
        yield cli.main


RUN_SECONDS = 60  # far beyond what a two-second clip takes: only a run that never ends reaches it
MEMORY_BYTES = 1 << 30  # the process's peak may grow by this much over the whole test


def hostile_wavs():
    """Two seconds of jfk.wav as a 16-bit WAV with fields of its header replaced and its end cut: a
    description of each case (readable when one fails), and its bytes."""
    from hypothesis import strategies as st

    clip = soundfile.read(JFK, dtype="int16")[0][16_000:48_000]
    buffer = io.BytesIO()
    soundfile.write(buffer, clip, 16000, format="WAV", subtype="PCM_16")
    wav = buffer.getvalue()
    header_end = wav.find(b"data") + 8
    fields = st.fixed_dictionaries({}, optional={
        "channels": st.sampled_from([0, 1, 2, 3, 255, 65535]),
        "rate": st.sampled_from([0, 1, 999, 1000, 8000, 16000, 44100, 768_000, 768_001, 2**31, 2**32 - 1]),
        "block": st.sampled_from([0, 1, 2, 3, 4, 65535]),
        "bits": st.sampled_from([0, 1, 7, 8, 12, 16, 24, 32, 64, 65535]),
        "data_size": st.sampled_from([0, 1, 2**31, 2**32 - 1]),  # the data chunk's declared size
    })

    def made(case: dict) -> bytes:
        header = {name: value for name, value in case.items() if name not in ("data_size", "kept")}
        data = bytearray(with_fmt(wav, **header))
        if "data_size" in case:
            struct.pack_into("<I", data, header_end - 4, case["data_size"])
        return bytes(data[: max(12, int(len(data) * case["kept"]))])

    cases = st.builds(lambda header, kept: {**header, "kept": kept}, fields, st.sampled_from([1.0, 0.5, 0.02, 0.0]))
    return cases, made


@pytest.mark.slow
def test_any_wav_header_or_cut_gives_text_or_one_clear_line(cli, tmp_path):
    from hypothesis import HealthCheck, example, given, settings

    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    cases, made = hostile_wavs()

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(cases)
    @example({"channels": 1, "data_size": 0, "bits": 64, "kept": 1.0})  # 64-bit integers: PyAV has no array for them
    def check(case):
        path = tmp_path / "hostile.wav"
        path.write_bytes(made(case))
        out, err = io.StringIO(), io.StringIO()
        result = {}

        def run():
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                result["status"] = cli(["transcribe", str(path)])

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        worker.join(RUN_SECONDS)
        assert not worker.is_alive(), f"no end after {RUN_SECONDS} s"
        assert "Traceback" not in err.getvalue() and "status" in result, err.getvalue()
        errors = [line for line in err.getvalue().splitlines() if line.startswith("sayso: ")]
        if result["status"] == 0:
            assert not errors and out.getvalue().strip().isprintable() or out.getvalue().strip() == ""
        else:
            assert result["status"] == 1 and len(errors) == 1, err.getvalue()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        assert peak - peak_before < MEMORY_BYTES, f"the peak grew by {(peak - peak_before) >> 20} MB"

    check()
