"""Bad input and a hostile environment: never a wrong transcript, a traceback or a silent loss.

Each case runs ``sayso transcribe`` as a user runs it, in a fresh process: the audio is repaired (a
warning says how) or refused in one line, a damaged model is named as damaged, a refused write or a
closed output is one line and a non-zero exit, and an option the model can't honour is refused before
any audio is decoded. The property test at the end feeds the command's audio path odd but valid WAVs.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile
import soxr

from support.cli import cli_env
from support.data import AUDIO, ROOT, TINY_EN_GGUF
from support.texts import JFK_WORDS, words
from sayso.engine.errors import ModelFileError
from sayso.engine.gguf.reader import ModelFile

JFK = AUDIO / "jfk.wav"


def sayso(args: list[str], data_dir: Path, stdout=subprocess.PIPE, preexec_fn=None) -> subprocess.CompletedProcess:
    """``sayso ARGS`` in a fresh process on the numpy backend; stderr captured as text."""
    return subprocess.run([sys.executable, "-m", "sayso", *args], cwd=ROOT, env=cli_env(data_dir), stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=300, preexec_fn=preexec_fn)


def transcribe(path, data_dir: Path, *options: str, **run) -> subprocess.CompletedProcess:
    return sayso(["transcribe", str(path), "--model", str(TINY_EN_GGUF), "--device", "cpu", *options], data_dir, **run)


def one_line_error(done: subprocess.CompletedProcess) -> str:
    """The one ``sayso:`` line of a failed run (no traceback), which is returned."""
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("sayso: ")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def float_wav(path: Path, pcm: np.ndarray) -> Path:
    soundfile.write(path, pcm, 16000, subtype="FLOAT")
    return path


@pytest.fixture(scope="module")
def jfk_samples() -> np.ndarray:
    return soundfile.read(JFK, dtype="float32")[0]


def test_one_nan_sample_is_heard_as_silence(jfk_samples, tmp_path):
    pcm = jfk_samples.copy()
    pcm[100_000] = np.nan  # one sample of 176,000 must not turn the transcript into "!"s
    done = transcribe(float_wav(tmp_path / "onenan.wav", pcm), tmp_path)
    assert done.returncode == 0, done.stderr
    assert words(done.stdout) == JFK_WORDS
    assert "1 samples are not numbers" in done.stderr


def test_runs_of_nan_and_infinity_are_silenced_and_the_rest_transcribed(jfk_samples, tmp_path):
    pcm = jfk_samples.copy()
    pcm[150_000:152_000], pcm[152_000:153_000] = np.nan, np.inf  # after "ask what you can do"
    done = transcribe(float_wav(tmp_path / "runs.wav", pcm), tmp_path)
    assert done.returncode == 0, done.stderr
    assert "3000 samples are not numbers" in done.stderr
    assert words(done.stdout).startswith("and so my fellow americans ask not what your country can do for you")


def test_samples_far_beyond_full_scale_are_refused(jfk_samples, tmp_path):
    error = one_line_error(transcribe(float_wav(tmp_path / "huge.wav", jfk_samples * 1e30), tmp_path))
    assert "far beyond full scale" in error and "Normalise it" in error


def test_samples_somewhat_over_full_scale_are_clipped(jfk_samples, tmp_path):
    done = transcribe(float_wav(tmp_path / "loud.wav", jfk_samples * 4), tmp_path)
    assert done.returncode == 0 and "clipped" in done.stderr
    assert words(done.stdout) == JFK_WORDS


def test_a_model_with_damaged_weights_is_named_as_damaged(tmp_path):
    damaged = tmp_path / "damaged.gguf"
    data = bytearray(TINY_EN_GGUF.read_bytes())
    middle = len(data) // 2
    data[middle : middle + (4 << 20)] = b"\xff" * (4 << 20)  # 4 MB of 0xFF: NaN scales and weights
    damaged.write_bytes(bytes(data))
    done = sayso(["transcribe", str(JFK), "--model", str(damaged), "--device", "cpu"], tmp_path)
    error = one_line_error(done)
    assert str(damaged) in error and "is damaged" in error and "Download or convert the model again" in error
    assert done.stdout == ""  # no text at all, never a transcript of "!"


@pytest.mark.parametrize("family", ["parakeet-tdt-v3", "gigaam-v3-ctc", "gigaam-v3-rnnt"])
def test_a_damaged_conformer_model_is_named_as_damaged(family, tmp_path):
    from sayso.engine.convert.random_model import write_random_model
    from sayso.engine.engine import Engine
    from sayso.engine.errors import ModelFileError

    path = write_random_model(family, tmp_path / f"{family}.gguf", small=True)
    size = path.stat().st_size
    with open(path, "r+b") as file:  # an eighth of the file, in the weights, of 0xFF: NaN in every float type
        file.seek(size // 2)
        file.write(b"\xff" * (size // 8))
    with pytest.raises(ModelFileError, match="is damaged"):  # named at load, where every tensor is checked
        Engine(path, device="cpu", vad=False).transcribe(soundfile.read(JFK, dtype="float32")[0][:48_000])


def test_options_the_model_cant_honour_are_refused_up_front(tmp_path):
    error = one_line_error(transcribe(JFK, tmp_path, "--task", "translate"))
    assert "can't translate" in error and "multilingual Whisper model" in error
    error = one_line_error(transcribe(JFK, tmp_path, "--language", "xx"))
    assert "doesn't know the language 'xx'" in error and "only en" in error


def test_a_prompt_never_takes_the_text_over(tmp_path):
    prompt = " ".join(f"word{i}" for i in range(10_000))
    done = transcribe(JFK, tmp_path, "--prompt", prompt)
    assert done.returncode == 0, done.stderr
    assert words(done.stdout) == JFK_WORDS  # it wrote "word9999" before
    assert "the model takes its last 223" in done.stderr


def test_closed_broken_and_full_outputs_fail_in_one_line(tmp_path):
    closed = transcribe(JFK, tmp_path, stdout=subprocess.DEVNULL, preexec_fn=lambda: os.close(1))
    assert "Standard output is closed" in one_line_error(closed)
    with open("/dev/full", "w") as full:
        assert "No space left on device" in one_line_error(transcribe(JFK, tmp_path, stdout=full))
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before Sayso writes
    with os.fdopen(write_end, "w") as pipe:
        broken = transcribe(JFK, tmp_path, stdout=pipe)
    assert "closed it before the end" in one_line_error(broken)


def test_a_disk_that_fills_during_the_first_conversion_leaves_no_partial_model(tmp_path):
    def small_files():  # the kernel refuses writes past 8 MB in this process (EFBIG), as a full disk would
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (8 << 20, 8 << 20))

    done = sayso(["transcribe", str(JFK), "--device", "cpu"], tmp_path, preexec_fn=small_files)
    assert "The disk is full" in one_line_error(done)
    assert list((tmp_path / "models").iterdir()) == []


def test_a_folder_that_cant_be_written_is_one_line(tmp_path):
    done = sayso(["transcribe", str(JFK), "--device", "cpu"], Path("/sys/sayso-data"))  # read-only, even for root
    assert "SAYSO_DATA_DIR" in one_line_error(done)


ENGINE_WHOSE_MODEL_IS_CUT = """
import sys
from sayso.engine.audio import load_audio
from sayso.engine.engine import Engine

model, clip = sys.argv[1:]
engine = Engine(model, device="cpu")
pcm = load_audio(clip)
print(engine.transcribe(pcm).text, flush=True)
with open(model, "r+b") as f:  # what `cp other.gguf model.gguf` does first
    f.truncate(4096)
print(engine.transcribe(pcm).text, flush=True)
"""


def test_a_model_file_cut_short_under_a_running_engine_changes_nothing(tmp_path):
    """The numpy backend reads its weights, the tokenizer its strings, all along: from the process's own
    copy of the file, so a file cut short under it (SIGBUS on a mapped file) changes nothing."""
    model = tmp_path / "model.gguf"
    model.write_bytes(TINY_EN_GGUF.read_bytes())
    done = subprocess.run([sys.executable, "-c", ENGINE_WHOSE_MODEL_IS_CUT, str(model), str(JFK)], cwd=ROOT,
                          env=cli_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"exit {done.returncode} (a SIGBUS is {-signal.SIGBUS}): {done.stderr}"
    before, after = done.stdout.splitlines()
    assert after == before and words(before) == JFK_WORDS


def test_a_model_file_cut_short_while_it_loads_is_one_clear_error(tmp_path, monkeypatch):
    model = tmp_path / "model.gguf"
    model.write_bytes(TINY_EN_GGUF.read_bytes())
    sendfile = os.sendfile

    def cut_then_send(out_fd, in_fd, offset, count):  # the file is cut after its size was read
        os.truncate(model, 1 << 20)
        return sendfile(out_fd, in_fd, offset, count)

    monkeypatch.setattr(os, "sendfile", cut_then_send)
    with pytest.raises(ModelFileError, match="changed while it was being read") as error:
        ModelFile(model)
    assert str(model) in str(error.value) and "load it again" in str(error.value)


@pytest.mark.parametrize(("kind", "problem"), [
    ("fifo", "is a pipe (FIFO), not an audio file"), ("/dev/zero", "is a character device"),
    ("/dev/null", "is a character device"), ("loop", "can't be reached (Too many levels of symbolic links)"),
    ("dangling", "is a link to a file that doesn't exist"), ("folder", "is a folder, not a file"),
])
def test_special_files_are_named_for_what_they_are(tmp_path, kind, problem):
    from sayso.engine.audio import load_audio
    from sayso.engine.errors import AudioError

    path = {"fifo": tmp_path / "fifo", "loop": tmp_path / "a", "dangling": tmp_path / "gone",
            "folder": tmp_path}.get(kind, Path(kind))
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "loop":
        (tmp_path / "a").symlink_to(tmp_path / "b")
        (tmp_path / "b").symlink_to(tmp_path / "a")
    elif kind == "dangling":
        path.symlink_to(tmp_path / "nothing")
    with pytest.raises(AudioError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        load_audio(path)


def test_models_rm_and_list_agree_on_what_is_installed(tmp_path):
    listed = sayso(["models", "list"], tmp_path)
    assert listed.returncode == 0 and "Installed: none yet" in listed.stdout
    error = one_line_error(sayso(["models", "rm", "whisper-base"], tmp_path))
    assert error == "sayso: No model called 'whisper-base' is installed. Installed: none yet."


# ---- the property: any valid WAV gives text, empty text or one clear error ------------------------------

SUBTYPES = {"PCM_U8": None, "PCM_16": None, "PCM_24": None, "PCM_32": None, "FLOAT": "float", "DOUBLE": "float"}


@pytest.fixture(scope="module")
def cli_with_one_engine(tmp_path_factory):
    """``app.cli.main`` in this process, its engine loaded once (Whisper tiny.en on numpy)."""
    from sayso.app import cli
    from sayso.engine.engine import Engine

    engine = Engine(TINY_EN_GGUF, device="cpu")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli, "_engine", lambda args: engine)
        patch.setenv("SAYSO_DATA_DIR", str(tmp_path_factory.mktemp("data")))
        yield cli.main


def odd_wavs():
    from hypothesis import strategies as st

    speech = soundfile.read(JFK, dtype="float32")[0][16_000:48_000]

    @st.composite
    def wav(draw):
        subtype = draw(st.sampled_from(sorted(SUBTYPES)))
        rate = draw(st.sampled_from([8000, 11025, 16000, 22050, 44100, 48000, 96000]))
        channels = draw(st.integers(1, 3))
        frames = draw(st.sampled_from([2 * rate, rate, rate // 10, 100, 1, 0]))
        gain = draw(st.sampled_from([1.0, 3.0, 1e-3, 1e4, 1e-6, 0.0, 1e30]))
        source = draw(st.sampled_from(["speech", "noise", "tone"]))
        t = np.arange(frames) / rate
        mono = {"speech": np.resize(soxr.resample(speech, 16000, rate), frames), "tone": 0.5 * np.sin(2 * np.pi * 440 * t),
                "noise": np.random.default_rng(frames).uniform(-0.5, 0.5, frames)}[source]
        pcm = np.repeat((mono * gain)[:, None], channels, axis=1).astype(np.float64)
        if SUBTYPES[subtype] == "float" and frames and draw(st.booleans()):
            at = draw(st.integers(0, frames - 1))
            pcm[at : at + draw(st.integers(1, 4000)), 0] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
        return subtype, rate, pcm

    return wav()


def test_any_valid_wav_gives_text_empty_text_or_one_clear_error(cli_with_one_engine, tmp_path):
    import contextlib
    import io

    from hypothesis import HealthCheck, given, settings

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(odd_wavs())
    def check(case):
        subtype, rate, pcm = case
        path = tmp_path / "odd.wav"
        soundfile.write(path, pcm, rate, subtype=subtype)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cli_with_one_engine(["transcribe", str(path)])
        errors = [line for line in err.getvalue().splitlines() if line.startswith("sayso: ")]
        if status == 0:
            text = out.getvalue().strip()
            assert not errors and text.isprintable() or text == ""
            assert not any(ch * 20 in text for ch in set(text)), f"a run of one character: {text!r}"
        else:
            assert status == 1 and len(errors) == 1, err.getvalue()

    check()
