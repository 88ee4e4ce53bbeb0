"""Sayso as a user installs it: the wheel built from this tree, installed into a fresh environment,
run from elsewhere with an empty HOME. It must bring everything it reads (kernels, icons, sounds, the
voice model) as package data under its one top-level name, and pass its self-test with voice detection
on. The fresh environment borrows its dependencies from the test's own (a path entry, not an install),
so only Sayso's own files come from the wheel."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.data import AUDIO, ROOT, TINY_EN_GGUF
from support.texts import reference_words, words


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


@dataclass(frozen=True)
class Installed:
    """The wheel installed into a fresh environment: its ``sayso`` command, Python and site-packages, and
    the environment of a user whose HOME is empty."""

    sayso: Path
    python: Path
    packages: Path
    home: Path
    env: dict[str, str]


def install(wheel: Path, folder: Path) -> Installed:
    env_dir = folder / "env"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    packages = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                   capture_output=True, text=True, check=True).stdout.strip())  # fmt: skip
    installed = {p.name for p in packages.iterdir()} - {"__pycache__"}
    assert installed == {"sayso", wheel.name.split("-py3")[0] + ".dist-info"}
    (packages / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    home = folder / "home"
    home.mkdir()
    own = ("SAYSO_", "XDG_DATA", "XDG_CACHE", "XDG_CONFIG", "XDG_STATE", "PYTHON")
    env = {k: v for k, v in os.environ.items() if not k.startswith(own)}
    env.update(HOME=str(home), QT_QPA_PLATFORM="offscreen")
    return Installed(env_dir / "bin" / "sayso", python, packages, home, env)


def test_installed_into_a_fresh_environment_it_passes_its_selftest(wheel, tmp_path):
    installed = install(wheel, tmp_path)
    python, packages, home, env = installed.python, installed.packages, installed.home, installed.env
    run = subprocess.run([installed.sayso, "--selftest", str(AUDIO / "jfk.wav")], cwd=tmp_path, env=env,
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


def test_a_model_bundled_in_the_package_is_used_as_it_is(wheel, tmp_path):
    """The one-folder app and the AppImage carry the default model converted, in sayso/models (build.sh): a
    first start with an empty HOME transcribes with it and converts nothing; it is listed as bundled, and
    kept when asked to remove it."""
    installed = install(wheel, tmp_path)
    bundled = installed.packages / "sayso" / "models" / "whisper-tiny.en.gguf"
    bundled.parent.mkdir()
    shutil.copyfile(TINY_EN_GGUF, bundled)

    def sayso(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([installed.sayso, *args], cwd=tmp_path, env=installed.env, capture_output=True,
                              text=True, timeout=300)  # fmt: skip

    run = sayso("--selftest", str(AUDIO / "jfk.wav"))
    assert run.returncode == 0, run.stderr
    assert words(run.stdout) == reference_words("jfk.wav")
    assert not (installed.home / ".local" / "share" / "sayso" / "models").exists()
    listed = sayso("models", "list")
    mine = listed.stdout.split("Available")[0].splitlines()
    assert [line.split()[-2:] for line in mine if line.startswith("whisper-tiny.en ")] == [["bundled", str(bundled)]]
    removed = sayso("models", "rm", "whisper-tiny.en")
    assert removed.returncode != 0 and "ships with Sayso" in removed.stderr, removed.stderr
    assert len(removed.stderr.strip().splitlines()) == 1 and bundled.is_file()
