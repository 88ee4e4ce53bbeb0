"""Open a GGUF model file (transcribe.cpp's layout) and hand out its metadata and weights.

The header is read with every length checked (``header.read_header``), so a truncated, corrupt or
unsupported file fails with one ``ModelFileError`` that names the file and the problem. Weights stay
in a mapping: ``tensor()`` gives the raw GGUF blocks for a backend to upload, ``array()`` a
dequantized float32 copy for small tensors.

The mapping is of a private copy of the file (``PrivateCopy``), not of the file: a file that is cut
short while a process maps it (a ``cp`` over an installed model truncates it first) makes every later
read of the pages past its new end a SIGBUS, which kills the process. The numpy backend reads its
weights, and the tokenizer its strings, from the mapping for as long as the model is loaded, so
a change to the file must not reach them. The copy is made by the kernel (``sendfile``) in file order:
the header before it is read, the weights on a thread of its own while the model loads, so that a
backend uploads the first weights while the last are still being copied. A weight is handed out once
the copy has passed its end, a file that shrinks under the copy is a ``ModelFileError`` for whatever
asks for the bytes it lost, and the copy's pages go as a backend lets them (``release``).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
import weakref
from functools import partial
from pathlib import Path

import numpy as np

from sayso.engine.errors import ModelFileError
from sayso.engine.gguf.header import Header, HeaderError, TensorInfo, read_header
from sayso.engine.gguf.q8_0 import Q8_0_BLOCK_BYTES, q8_0_values
from sayso.engine.ops import WeightSource

_DTYPES = {"F32": np.float32, "F16": np.float16}
"""numpy dtype of the unquantized types; a quantized tensor is given as its raw bytes (uint8)."""

FIRST_COPY = 8 * 2**20
"""Bytes copied before the header is read, room for a model's vocabulary: each of them delays the load,
and a header that doesn't end inside them waits for the whole file."""

COPY_CHUNK = 16 * 2**20
"""Bytes the background copy moves at a time: a weight that waits for the copy goes on once the chunk
that holds its end is there."""

_CHANGED = "Wait until whatever writes it has finished, then load it again."


class PrivateCopy:
    """The bytes of open file ``f`` in memory of this process's own (a ``memfd``), mapped whole
    (``map``) from the start and filled in file order: ``fill`` copies up to a byte on the calling
    thread, ``start`` the rest on a thread of its own, and ``wait`` returns once the bytes up to a
    byte are there, or raises the ``ModelFileError`` that stopped the copy short of them (the file
    shrank). Until the copy has passed a page it is a hole, which nothing may read for the file's
    bytes. ``release_advice`` is the ``madvise`` advice that frees the mapping's pages. Where there is
    no ``memfd_create`` (macOS; Windows refuses to truncate a mapped file) the file itself is mapped,
    whole from the start."""

    def __init__(self, f, path: Path):
        self.path = path
        self._fds: list[int] = []  # the file and the memfd, the copy's own: they outlive ``f``
        self._thread: threading.Thread | None = None
        self._progress = threading.Condition()  # notified as ``copied`` grows and when the copy ends
        self._ended = False
        self._error: tuple[str, ...] | None = None  # why the copy ended short: ModelFileError's problem, hint
        self._stopped = False
        if not hasattr(os, "memfd_create"):
            self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            self.size = self.copied = len(self.map)
            self.release_advice = getattr(mmap, "MADV_DONTNEED", 0)
            return
        self.size = os.fstat(f.fileno()).st_size
        self.copied = 0  # the mapping holds the file's bytes up to here
        self.release_advice = mmap.MADV_REMOVE  # frees a memfd's pages; MADV_DONTNEED would only unmap them
        try:
            self._fds += [os.dup(f.fileno()), os.memfd_create(path.name, os.MFD_CLOEXEC)]
            os.ftruncate(self._fds[1], self.size)
            self.map = mmap.mmap(self._fds[1], self.size, access=mmap.ACCESS_WRITE)
        except BaseException:
            self._close_fds()
            raise

    def fill(self, end: int) -> None:
        """Copy the bytes up to ``end`` now, on this thread (the header, before ``start``)."""
        self._send(end)
        if self._error:
            raise ModelFileError(self.path, *self._error)

    def start(self) -> None:
        """Copy the rest on a thread of its own, which closes the copy's files when it is done."""
        if self.copied < self.size:
            self._thread = threading.Thread(target=self._copy_rest, name=f"copy of {self.path.name}", daemon=True)
            self._thread.start()
        else:
            self._close_fds()

    def wait(self, end: int) -> None:
        """Return once the bytes up to ``end`` are in the mapping; the ``ModelFileError`` that ended the
        copy short of them if they never will be."""
        if self.copied >= end:
            return
        with self._progress:
            while self.copied < end and not self._ended:
                self._progress.wait()
        if self.copied < end:
            raise ModelFileError(self.path, *(self._error or ("can't be read (its copy ended early)",)))

    def stop(self) -> None:
        """End the copy after its current chunk: nothing will read the rest (the load failed, or its
        ``ModelFile`` is gone)."""
        self._stopped = True
        if self._thread is None:
            self._close_fds()

    def _send(self, end: int, chunk: int | None = None) -> None:
        """Copy up to ``end`` (``chunk`` bytes at a time, telling ``wait`` after each); on a failure,
        say why in ``_error``."""
        try:
            while self.copied < end and not self._stopped:  # page cache to page cache: no pass through Python
                sent = os.sendfile(self._fds[1], self._fds[0], self.copied, min(end - self.copied, chunk or end))
                if sent == 0:
                    now = os.fstat(self._fds[0]).st_size
                    problem = f"changed while it was being read (it was {self.size} bytes, is {now} now)"
                    self._error = (problem, _CHANGED)
                    return
                with self._progress:
                    self.copied += sent  # sendfile writes at the memfd's own position, which moves on with it
                    self._progress.notify_all()
        except OSError as e:
            self._error = (f"can't be read ({e.strerror or e})",)

    def _copy_rest(self) -> None:
        try:
            self._send(self.size, COPY_CHUNK)
        finally:
            self._close_fds()
            with self._progress:
                self._ended = True
                self._progress.notify_all()

    def _close_fds(self) -> None:
        while self._fds:
            os.close(self._fds.pop())


class ModelFile:
    """A GGUF model file, validated and memory-mapped.

    ``metadata`` maps each key, in file order, to a Python value: str, int, float, bool, a list of
    numbers, or for an array of strings (the tokenizer's tokens and merges) a ``StringArray``, which
    reads like a list. ``names`` lists the tensors in file order.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._check_is_file()
        try:
            with open(self.path, "rb") as f:
                self._copy = PrivateCopy(f, self.path)  # its mapping lives as long as the weights
        except (OSError, ValueError) as e:  # ValueError: the file shrank to nothing since the check
            raise ModelFileError(self.path, f"can't be read ({getattr(e, 'strerror', None) or e})") from None
        self._map, self._release_advice = self._copy.map, self._copy.release_advice
        try:
            header = self._read_header()
        except ModelFileError:
            self._copy.stop()
            self._map.close()
            raise
        self._copy.start()
        weakref.finalize(self, self._copy.stop)
        self.version = header.version
        self.metadata: dict[str, object] = header.metadata
        self._types = header.types
        self._data_offset = header.data_offset
        self._tensors: dict[str, TensorInfo] = {t.name: t for t in header.tensors}
        self._handed_out: dict[str, int] = {}  # how many times ``tensor`` gave each tensor
        self._freed: list[tuple[int, int]] = []  # byte ranges of the private copy let go, to read again

    def _read_header(self) -> Header:
        """Walk the header as soon as the copy holds its first ``FIRST_COPY`` bytes. A walk reads nothing
        past where it ends, so one that ends inside them is the file's own. One that doesn't (a longer
        header, a broken file) may have read holes past them, zeros taken for the file's bytes: it is
        walked again once the whole file is copied. The rest is copied on a thread of its own only
        after the walk (``start``), so nothing writes what a walk reads."""
        copy = self._copy
        copy.fill(min(FIRST_COPY, copy.size))
        try:
            if copy.copied < copy.size:
                with contextlib.suppress(HeaderError):
                    header = read_header(self._map)
                    if header.data_offset <= copy.copied:
                        return header
                copy.fill(copy.size)
            return read_header(self._map)
        except HeaderError as e:
            raise ModelFileError(self.path, str(e)) from None

    def _check_is_file(self) -> None:
        if not self.path.exists():
            raise ModelFileError(self.path, "no such file", "Check the path, or pick a model from the list.")
        if self.path.is_dir():
            raise ModelFileError(self.path, "is a directory, not a GGUF model file", "Give the path of a .gguf file.")
        if self.path.stat().st_size == 0:
            raise ModelFileError(self.path, "is empty (0 bytes)")

    # ---- metadata -------------------------------------------------------------------------------

    def get(self, key: str, default: object = None) -> object:
        """The value of metadata ``key``, or ``default`` when the file doesn't have it."""
        return self.metadata.get(key, default)

    def require(self, key: str) -> object:
        """The value of metadata ``key``; a ModelFileError naming the file and key when it is missing."""
        if key not in self.metadata:
            raise ModelFileError(self.path, f"metadata key '{key}' is missing")
        return self.metadata[key]

    def value_type(self, key: str) -> str:
        """The GGUF type of a metadata value as written: ``"UINT32"``, ``"STRING"``, ``"ARRAY[INT32]"``..."""
        if key not in self._types:
            raise ModelFileError(self.path, f"metadata key '{key}' is missing")
        return self._types[key]

    @property
    def architecture(self) -> str:
        """``general.architecture``: the model family (``"whisper"``)."""
        return str(self.require("general.architecture"))

    # ---- tensors --------------------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        """Tensor names in file order."""
        return list(self._tensors)

    def has(self, name: str) -> bool:
        return name in self._tensors

    def shape(self, name: str) -> tuple[int, ...]:
        """Tensor ``name``'s logical shape (``tensor``'s), without handing its data out."""
        t = self._tensors.get(name)
        if t is None:
            raise ModelFileError(self.path, f"tensor '{name}' is missing")
        return tuple(reversed(t.ne))

    def tensor(self, name: str) -> WeightSource:
        """The tensor's raw GGUF data, memory-mapped, with its logical numpy shape, once the copy holds
        it (a ``ModelFileError`` if the file shrank before the copy reached its end).

        The shape is the reverse of ggml's ``ne`` (``[N, K]`` for a linear weight). ``data`` is
        float32/float16 in that shape, or for Q8_0 uint8 ``[..., K/32*34]`` (per row of 32 values:
        an f16 scale then 32 int8).
        """
        t = self._tensors.get(name)
        if t is None:
            raise ModelFileError(self.path, f"tensor '{name}' is missing")
        shape = tuple(reversed(t.ne))
        offset = self._data_offset + t.offset
        self._copy.wait(offset + t.nbytes)
        self._read_again(offset, offset + t.nbytes)
        self._handed_out[name] = self._handed_out.get(name, 0) + 1
        raw = np.frombuffer(self._map, np.uint8, t.nbytes, offset)
        raw.flags.writeable = False  # the copy is writable only so that its pages can be let go
        if t.ggml_type in _DTYPES:
            data = raw.view(_DTYPES[t.ggml_type]).reshape(shape)
        else:  # rows of blocks: [..., K / block * bytes per block]
            data = raw.reshape(*shape[:-1], -1)
        release = partial(self._release_rows, name, offset, t.nbytes, shape[0] if shape else 1)
        return WeightSource(name=name, ggml_type=t.ggml_type, shape=shape, data=data, release=release)

    def _release_rows(self, name: str, offset: int, nbytes: int, rows: int, start: int = 0,
                      stop: int | None = None) -> None:
        """``_release`` rows ``start .. stop`` (all of them by default) of tensor ``name`` of ``rows``
        rows at ``offset``: a backend that copies a large weight a few rows at a time lets each part
        go. Only a tensor handed out once: another holder (a second backend on the same file) may
        still read its view."""
        if self._handed_out.get(name) != 1:
            return
        row_bytes = nbytes // max(1, rows)
        stop = rows if stop is None else min(stop, rows)
        self._release(offset + start * row_bytes, (stop - start) * row_bytes)

    def _release(self, offset: int, nbytes: int) -> None:
        """Free the whole pages of bytes offset .. offset+nbytes: a GPU that copied a weight to its own
        memory no longer needs them. The views already given read zeros there after (where the file
        itself is mapped, its bytes again); ``tensor`` reads them from the file again first."""
        page = mmap.PAGESIZE
        start, end = -(-offset // page) * page, (offset + nbytes) // page * page
        if end > start and hasattr(self._map, "madvise"):  # madvise: not on Windows
            self._map.madvise(self._release_advice, start, end - start)
            if self._release_advice == getattr(mmap, "MADV_REMOVE", None):
                self._freed.append((start, end))

    def _read_again(self, start: int, end: int) -> None:
        """Fill the freed ranges that overlap bytes start .. end from the file again (a model loaded on
        the GPU, then on the CPU after the GPU failed), checking that the file still has them."""
        overlapping = [(a, b) for a, b in self._freed if a < end and start < b]
        if not overlapping:
            return
        with open(self.path, "rb") as f, memoryview(self._map) as copy:
            for a, b in overlapping:
                f.seek(a)
                if f.readinto(copy[a:b]) != b - a:
                    raise ModelFileError(self.path, "changed since it was loaded", _CHANGED)
                self._freed.remove((a, b))

    def array(self, name: str) -> np.ndarray:
        """The tensor dequantized to a float32 array of its logical shape (a copy, for small tensors such
        as position tables). Its pages stay: another part of the model may read the same tensor."""
        source = self.tensor(name)
        values = source.data
        if source.ggml_type == "Q8_0":
            values = q8_0_values(np.asarray(values).reshape(-1, Q8_0_BLOCK_BYTES))
        return np.array(values, dtype=np.float32).reshape(source.shape)

    def __repr__(self) -> str:
        return f"ModelFile({str(self.path)!r}, {self.get('general.architecture')!r}, {len(self._tensors)} tensors)"
