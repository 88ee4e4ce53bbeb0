"""transcribe.cpp's published models, downloaded from the Hugging Face hub into the hub's own cache.

transcribe.cpp publishes every model it runs as a hub repository ``handy-computer/<variant>-gguf``
holding ``<variant>-<QUANT>.gguf`` files (F32, F16, Q8_0 and, for the larger ones, K quants). Sayso
names them by short names (``whisper-base``, ``moonshine-tiny``, ``parakeet-v3``: ``engine.catalogue.CATALOG``)
and takes the Q8_0 file, the quantization its kernels run.

Files live in the hub's cache layout (``$HF_HUB_CACHE``, by default ``~/.cache/huggingface/hub``),
so a model fetched with ``hf download`` is found here and one pulled here is listed by ``hf cache``.

A pull moves the bytes itself (``engine.download``: huggingface_hub's ``http_get``, Range requests,
retries when the connection drops), rather than calling ``hf_hub_download`` for the transfer, for two reasons:
the partial file survives an interrupted pull (the app quit, the laptop slept) so the next pull
continues where it stopped, which huggingface_hub 2.x doesn't do (it deletes its partial files on
failure); and the sha256 the hub publishes is checked before the file enters the cache, so a
corrupt download is never visible to Sayso or to ``hf``. ``hf_hub_download`` then links the
finished blob into the snapshot folder and records the ref, exactly as it does for its own files.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import httpx2
from huggingface_hub import (
    constants,
    get_hf_file_metadata,
    hf_hub_download,
    hf_hub_url,
    scan_cache_dir,
    try_to_load_from_cache,
)
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled
from huggingface_hub.file_download import repo_folder_name
from huggingface_hub.utils import WeakFileLock, build_hf_headers

from sayso.engine.catalogue import CATALOG, HubModel
from sayso.engine.convert.whisper import Progress
from sayso.engine.download import MIN_FREE_BYTES, digest, resume
from sayso.engine.errors import SaysoError
from sayso.engine.gguf.sums import record_sums, sums_path

log = logging.getLogger(__name__)


def cache_dir() -> Path:
    """The hub cache: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``."""
    return Path(constants.HF_HUB_CACHE).expanduser()


def endpoint() -> str:
    """The hub's address: ``$HF_ENDPOINT``, else https://huggingface.co."""
    return constants.ENDPOINT


def lookup(name: str) -> HubModel:
    """The catalog entry called ``name``; SaysoError naming the known ones otherwise."""
    model = CATALOG.get(name)
    if model is None:
        raise SaysoError(f"No published model is called {name!r}. Models you can pull: {', '.join(CATALOG)}.")
    return model


def cached(model: HubModel) -> Path | None:
    """The model's file in the hub cache (the revision ``main`` points to), or None."""
    found = try_to_load_from_cache(model.repo_id, model.filename, cache_dir=cache_dir())
    return Path(found) if isinstance(found, str) else None


def installed() -> list[tuple[HubModel, Path]]:
    """The catalog models whose file is in the hub cache, however it got there (Sayso or ``hf``)."""
    return [(model, path) for model in CATALOG.values() if (path := cached(model)) is not None]


def pull(name: str, progress: Progress | None = None, cancel: threading.Event | None = None,
         min_free: int = MIN_FREE_BYTES) -> Path:
    """Download the model ``name`` into the hub cache unless it is there; returns its path.

    ``progress(fraction, message)`` is called as bytes arrive (every 10 MiB: huggingface_hub's chunk).
    A pull interrupted by anything (``cancel``, a crash, the network) keeps its partial file and
    the next pull asks the server for the rest. Raises SaysoError when the server can't be
    reached, the disk would keep less than ``min_free`` bytes free, or the file's sha256 is not the
    one the hub publishes (the bad file is deleted).
    """
    model = lookup(name)
    report = progress or (lambda fraction, message: None)
    found = cached(model)
    if found is not None:
        report(1.0, f"{name} is already downloaded")
        return found
    url, etag, size = _file_info(model)
    blobs = cache_dir() / repo_folder_name(repo_id=model.repo_id, repo_type="model") / "blobs"
    blob = blobs / etag
    if not blob.is_file():
        blobs.mkdir(parents=True, exist_ok=True)
        partial = blobs / f"{etag}.incomplete"
        with WeakFileLock(_lock_path(model, etag)):  # a second pull (or `hf download`) of the file waits here
            if not blob.is_file():
                resume(url, size, partial, model.name, report, cancel, _unreachable, min_free=min_free,
                       space_hint=", or set HF_HUB_CACHE to a disk with more room",
                       headers=build_hf_headers(token=False))
                report(1.0, f"Checking {name}")
                _verify(model, partial, etag)
                partial.replace(blob)
    try:  # the blob is in place: this only links it into the snapshot and records the ref
        path = Path(hf_hub_download(model.repo_id, model.filename, cache_dir=cache_dir(), endpoint=endpoint()))
    except (httpx2.TransportError, HfHubHTTPError, OSError) as error:
        raise _unreachable(error) from None
    if not sums_path(path).is_file():
        record_sums(path)  # the blob is the hub's: from here on a change on the disk is named at load
    report(1.0, f"Downloaded {name}")
    return path


def remove(name: str) -> int:
    """Delete the model ``name`` from the hub cache (its revisions, and any partial download); returns bytes freed."""
    model = lookup(name)
    repo = cache_dir() / repo_folder_name(repo_id=model.repo_id, repo_type="model")
    partials = list((repo / "blobs").glob("*.incomplete"))
    freed = sum(p.stat().st_size for p in partials)
    for partial in partials:
        partial.unlink()
    path = cached(model)
    if path is not None:
        # Snapshot folders are named by commit: delete that revision through the cache API, which
        # also drops blobs no other revision uses and refs pointing at it.
        strategy = scan_cache_dir(cache_dir()).delete_revisions(path.parent.name)
        freed += strategy.expected_freed_size
        strategy.execute()
    elif not partials:
        raise SaysoError(f"{name} is not downloaded, so there is nothing to remove.")
    return freed


def _lock_path(model: HubModel, etag: str) -> Path:
    """huggingface_hub's own lock for this blob, so Sayso and ``hf download`` never write it at once."""
    path = cache_dir() / ".locks" / repo_folder_name(repo_id=model.repo_id, repo_type="model") / f"{etag}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _file_info(model: HubModel) -> tuple[str, str, int]:
    """(download url, etag, size) of the model's file from the hub's HEAD answer."""
    url = hf_hub_url(model.repo_id, model.filename, endpoint=endpoint())
    try:
        meta = get_hf_file_metadata(url, token=False)
    except OfflineModeIsEnabled:
        raise SaysoError(
            f"Can't download {model.name}: HF_HUB_OFFLINE is set. Unset it, or use a local model."
        ) from None
    except (httpx2.TransportError, HfHubHTTPError) as error:
        status = getattr(getattr(error, "response", None), "status_code", None)
        if status == 404:
            raise SaysoError(
                f"The model server at {endpoint()} has no {model.filename} in {model.repo_id} (HTTP 404). "
                "The model may have moved: update Sayso, or check HF_ENDPOINT."
            ) from None
        raise _unreachable(error) from None
    if meta.etag is None or meta.size is None:
        raise SaysoError(
            f"The model server at {endpoint()} didn't give the size and checksum of {model.filename}; "
            "check that HF_ENDPOINT points to a Hugging Face hub."
        )
    return meta.location, meta.etag, meta.size


def _unreachable(error: Exception) -> SaysoError:
    return SaysoError(
        f"Can't reach the model server at {endpoint()} ({type(error).__name__}: {error}). "
        "Check your connection, or use a local model (a .gguf file, or one listed by `sayso models list`)."
    )


def _verify(model: HubModel, path: Path, etag: str) -> None:
    """Compare the file with the hub's etag: the sha256 for LFS files, the git blob sha1 for the others."""
    if len(etag) == 64:
        found = digest(path)
    else:
        found = digest(path, "sha1", f"blob {path.stat().st_size}\0".encode())
    if found != etag:
        path.unlink()
        raise SaysoError(
            f"The download of {model.name} is damaged (checksum {found[:12]}…, expected {etag[:12]}…) "
            "and was deleted. Pull it again; if it happens again, the network or a proxy is altering the file."
        )
