"""Sayso as a user installs it: the wheel built from this tree, installed into a fresh environment,
run from elsewhere with an empty HOME. It must bring everything it reads (kernels, icons, sounds, the
voice model) as package data under its one top-level name, and pass its self-test with voice detection
on. The fresh environment borrows its dependencies from the test's own (a path entry, not an install),
so only Sayso's own files come from the wheel."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from conftest import AUDIO, ROOT, reference_words, words


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
                   check=True, capture_output=True, timeout=600)  # fmt: skip
    (built,) = out.glob("sayso-*.whl")
    return built


def test_the_wheel_holds_one_package_with_its_data_and_licences(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"sayso", wheel.name.split("-py3")[0] + ".dist-info"}
    shaders = sorted(p.name for p in (ROOT / "shaders").glob("*.wgsl"))
    in_wheel = [n.rsplit("/", 1)[1] for n in names if n.startswith("sayso/shaders/") and n.endswith(".wgsl")]
    assert sorted(in_wheel) == shaders
    for data in ("sayso/resources/silero_vad.onnx", "sayso/resources/silero_vad.LICENSE.txt",
                 "sayso/resources/start.wav", "sayso/resources/sayso.svg", "sayso/resources/icons/mic.svg",
                 "sayso/__main__.py", "sayso/app/cli.py", "sayso/engine/gpu/ops/__init__.py"):  # fmt: skip
        assert data in names
    licences = {n.rsplit("/", 1)[1] for n in names if "/licenses/" in n}
    assert licences == {"LICENSE", "THIRD_PARTY_NOTICES.md"}
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("/METADATA"))).decode()
    assert "License-Expression: MIT" in metadata


def test_installed_into_a_fresh_environment_it_passes_its_selftest(wheel, tmp_path):
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    packages = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                   capture_output=True, text=True, check=True).stdout.strip())  # fmt: skip
    installed = {p.name for p in packages.iterdir()} - {"__pycache__"}
    assert installed == {"sayso", wheel.name.split("-py3")[0] + ".dist-info"}
    (packages / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    home = tmp_path / "home"
    home.mkdir()
    own = ("SAYSO_", "XDG_DATA", "XDG_CACHE", "XDG_CONFIG", "XDG_STATE", "PYTHON")
    env = {k: v for k, v in os.environ.items() if not k.startswith(own)}
    env.update(HOME=str(home), QT_QPA_PLATFORM="offscreen")
    run = subprocess.run([env_dir / "bin" / "sayso", "--selftest", str(AUDIO / "jfk.wav")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "voice detection on" in run.stderr
    assert words(run.stdout) == reference_words("jfk.wav")
    assert (home / ".local" / "share" / "sayso" / "models" / "whisper-tiny.en.gguf").is_file()
    version = subprocess.run([python, "-m", "sayso", "--version"], cwd=tmp_path, env=env, capture_output=True,
                             text=True)  # fmt: skip
    assert version.stdout.strip() == "sayso 0.1.0"
    imported = subprocess.run([python, "-c", "import sayso.engine; print(sayso.engine.__file__)"], cwd=tmp_path,
                              env=env, capture_output=True, text=True)  # fmt: skip
    assert Path(imported.stdout.strip()).is_relative_to(packages)
