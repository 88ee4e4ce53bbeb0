"""Open a GGUF model file (transcribe.cpp's layout) and hand out its metadata and weights.

The header is read with every length checked (``header.read_header``), so a truncated, corrupt or
unsupported file fails with one ``ModelFileError`` that names the file and the problem. ``tensor()``
gives a weight's raw GGUF blocks for a backend (``WeightSource``), read only when the backend asks for
them; ``array()`` a dequantized float32 copy of a small tensor.

A backend that reads its weights for as long as the model is loaded (numpy) reads them from a mapping
of a private copy of the file (``PrivateCopy``), not of the file: a file that is cut short while a
process maps it (a ``cp`` over an installed model truncates it first) makes every later read of the
pages past its new end a SIGBUS, which kills the process. The tokenizer reads its strings there too, so
a change to the file must not reach them. The copy is made by the kernel (``sendfile``) in file order:
the header before it is read; for such a backend the weights on a thread of its own while the model
loads (``copy_in_background``), so that it takes the first weights while the last are still being
copied. A backend that copies each weight once (a GPU) reads it from the file a part at a time
(``WeightSource.read``) and the copy never holds it: filling the copy costs more than the read itself
(its pages are allocated and zeroed first). A weight asked for in the mapping without the background
copy is read into it then. A file that shrinks or is replaced while it is read is a ``ModelFileError``
for whatever asks for bytes it no longer has, and the copy's pages go as a backend lets them
(``release``).

Each weight's values are checked as a backend first takes them, whole (``data``) or row by row (``read``),
so that damaged weights are named instead of giving a transcript of "!" or one word repeated: no float
that isn't a number (a float tensor's values, a Q8_0 tensor's scales), and no weight matrix of zeros
(``_Checks``); where the file's checksums were recorded beside it (``sums``), each tensor's bytes match
its own. The check reads what the backend reads anyway, once per tensor.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
import weakref
import zlib
from functools import partial
from pathlib import Path

import numpy as np

from sayso.engine.changes import changed_problem, identity as file_identity
from sayso.engine.errors import ModelFileError
from sayso.engine.gguf.header import Header, HeaderError, TensorInfo, read_header
from sayso.engine.gguf.q8_0 import Q8_0_BLOCK_BYTES, q8_0_values
from sayso.engine.gguf.sums import read_sums
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
    thread, ``start`` the rest on a thread of its own (``started``), and ``wait`` returns once the
    bytes up to a byte are there, or raises the ``ModelFileError`` that stopped the copy short of them
    (the file shrank, or is another file now). Until the copy has passed a page it is a hole, which
    nothing may read for the file's bytes (without ``start``, ``ModelFile`` fills what it needs itself).
    ``close_file`` lets go of the file between ``fill`` and ``start``. ``release_advice`` is
    the ``madvise`` advice that frees the mapping's pages. Where there is no ``memfd_create`` (macOS;
    Windows refuses to truncate a mapped file) the file itself is mapped, whole from the start."""

    def __init__(self, f, path: Path):
        self.path = path
        self.identity = file_identity(os.fstat(f.fileno()))
        self._file: int | None = None  # the copy's own descriptors, which outlive ``f``
        self._memfd: int | None = None
        self._thread: threading.Thread | None = None
        self.started = False  # whether ``start`` was called: the rest is, or was, copied
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
            self._file = os.dup(f.fileno())
            self._memfd = os.memfd_create(path.name, os.MFD_CLOEXEC)
            os.ftruncate(self._memfd, self.size)
            self.map = mmap.mmap(self._memfd, self.size, access=mmap.ACCESS_WRITE)
        except BaseException:
            self._close_fds()
            raise

    def fill(self, end: int) -> None:
        """Copy the bytes up to ``end`` now, on this thread (the header, before ``start``)."""
        self._send(end)
        if self._error:
            raise ModelFileError(self.path, *self._error)

    def close_file(self) -> None:
        """Let go of the file until ``start``: a descriptor held for as long as the model is loaded
        would keep a model file deleted or replaced meanwhile on the disk."""
        if self._file is not None:
            os.close(self._file)
            self._file = None

    def start(self) -> None:
        """Copy the rest on a thread of its own, which closes the copy's files when it is done (and
        opens the file again first, if ``close_file`` let go of it)."""
        self.started = True
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
                sent = os.sendfile(self._memfd, self._file, self.copied, min(end - self.copied, chunk or end))
                if sent == 0:
                    self._error = _changed(self.size, os.fstat(self._file).st_size)
                    return
                with self._progress:
                    self.copied += sent  # sendfile writes at the memfd's own position, which moves on with it
                    self._progress.notify_all()
        except OSError as e:
            self._error = (f"can't be read ({e.strerror or e})",)

    def _copy_rest(self) -> None:
        try:
            if self._file is not None or self._open_again():
                self._send(self.size, COPY_CHUNK)
        finally:
            self._close_fds()
            with self._progress:
                self._ended = True
                self._progress.notify_all()

    def _open_again(self) -> bool:
        """Open the file at ``path`` again if it is still the one the copy began (whether it is, else
        why not in ``_error``)."""
        try:
            self._file = _open_unchanged(self.path, self.identity)
            return True
        except ModelFileError as error:
            self._error = (error.problem, error.hint)
            return False

    def _close_fds(self) -> None:
        for fd in (self._file, self._memfd):
            if fd is not None:
                os.close(fd)
        self._file = self._memfd = None


class ModelFile:
    """A GGUF model file, validated, its header in memory and its weights read when asked for.

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
        self._copy.close_file()  # each read opens the file by path; ``copy_in_background`` too
        weakref.finalize(self, self._copy.stop)
        self.version = header.version
        self.metadata: dict[str, object] = header.metadata
        self._types = header.types
        self._data_offset = header.data_offset
        self._tensors: dict[str, TensorInfo] = {t.name: t for t in header.tensors}
        self._handed_out: dict[str, int] = {}  # how many times ``tensor`` gave each tensor
        # Byte ranges of the mapping that don't hold the file's bytes and that no background copy will
        # fill (sorted, apart): the weights until asked for, and the pages a backend let go.
        copy = self._copy
        self._holes: list[tuple[int, int]] = [(copy.copied, copy.size)] if copy.copied < copy.size else []
        self._filling = threading.Lock()  # a GPU's loading threads ask for small tensors at once
        self._checks = _Checks(self.path, read_sums(self.path, copy.size))

    def copy_in_background(self) -> None:
        """Copy the weights into the mapping on a thread of their own now, in file order, for a backend
        that reads them all there (numpy): each ``data`` then waits for the copy to pass it. Only while
        the copy holds no weight yet; after that each is read when asked for, as without this."""
        if self._holes == [(self._copy.copied, self._copy.size)]:
            self._holes = []
            self._copy.start()

    def _read_header(self) -> Header:
        """Walk the header as soon as the copy holds its first ``FIRST_COPY`` bytes. A walk reads nothing
        past where it ends, so one that ends inside them is the file's own. One that doesn't (a longer
        header, a broken file) may have read holes past them, zeros taken for the file's bytes: it is
        walked again once the whole file is copied. Nothing else fills the copy before the walk has
        ended, so nothing writes what a walk reads."""
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
        """The tensor's raw GGUF data with its logical numpy shape, read when the backend asks for it
        (``WeightSource``): in the mapping (``data``) or from the file (``read``). A ``ModelFileError``
        then if the file no longer has its bytes.

        The shape is the reverse of ggml's ``ne`` (``[N, K]`` for a linear weight). The rows are
        float32/float16 in that shape, or for Q8_0 uint8 ``[..., K/32*34]`` (per row of 32 values:
        an f16 scale then 32 int8).
        """
        t = self._tensors.get(name)
        if t is None:
            raise ModelFileError(self.path, f"tensor '{name}' is missing")
        shape = tuple(reversed(t.ne))
        self._handed_out[name] = self._handed_out.get(name, 0) + 1
        offset = self._data_offset + t.offset
        if t.ggml_type in _DTYPES:
            dtype, view_shape = np.dtype(_DTYPES[t.ggml_type]), shape
            rows, row_shape = (shape[0], shape[1:]) if shape else (1, ())
        else:  # rows of blocks: [..., K / block * bytes per block]
            dtype, view_shape = np.dtype(np.uint8), (*shape[:-1], -1)
            rows, row_shape = (shape[0], view_shape[1:]) if len(shape) > 1 else (1, (-1,))
        return WeightSource(name, t.ggml_type, shape, partial(self._view, t, offset, dtype, view_shape),
                            partial(self._release_rows, name, offset, t.nbytes, rows),
                            partial(self._read_rows, t, rows, offset, t.nbytes // rows, dtype, row_shape))

    def _view(self, t: TensorInfo, offset: int, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """Tensor ``t``'s bytes at ``offset`` of the mapping as a read-only array, once they hold the file's
        and passed the checks."""
        self._fill(offset, offset + t.nbytes)
        view = np.frombuffer(self._map, np.uint8, t.nbytes, offset)
        view.flags.writeable = False  # the copy is writable only so that it can be filled and let go
        self._checks.whole(t, view)
        return view.view(dtype).reshape(shape)

    def _read_rows(self, t: TensorInfo, n_rows: int, offset: int, row_bytes: int, dtype: np.dtype,
                   row_shape: tuple[int, ...], start: int, stop: int, into: memoryview | None) -> np.ndarray:
        """Rows start .. stop of tensor ``t`` (``n_rows`` rows at ``offset``) read from the file into ``into``
        (or an array of their own), as an array of their type and shape, once they passed the checks."""
        nbytes = (stop - start) * row_bytes
        rows = np.empty(nbytes, np.uint8) if into is None else np.frombuffer(into, np.uint8, nbytes)
        self._read_file(offset + start * row_bytes, memoryview(rows))
        self._checks.rows(t, rows, start, stop, n_rows)
        return rows.view(dtype).reshape(stop - start, *row_shape)

    def _fill(self, start: int, end: int) -> None:
        """Make bytes start .. end of the mapping the file's: wait for the background copy to pass them,
        read whatever the copy won't hold from the file."""
        if self._copy.started:
            self._copy.wait(end)
        with self._filling:
            holes = [(a, b) for a, b in self._holes if a < end and start < b]
            if not holes:
                return
            with memoryview(self._map) as mapping:
                for a, b in holes:
                    lo, hi = max(a, start), min(b, end)
                    self._read_file(lo, mapping[lo:hi])
                    self._holes.remove((a, b))
                    self._holes += [hole for hole in ((a, lo), (hi, b)) if hole[0] < hole[1]]
            self._holes.sort()

    def _read_file(self, offset: int, into: memoryview) -> None:
        """Fill ``into`` with the file's bytes from ``offset``: from the file this model was opened
        from, unchanged since (the same file, size and modification time), else a ModelFileError."""
        with open(_open_unchanged(self.path, self._copy.identity), "rb", buffering=0) as f:
            try:
                f.seek(offset)
                done = 0
                while done < len(into) and (got := f.readinto(into[done:])):
                    done += got
                if done < len(into):  # it shrank after it was opened
                    raise ModelFileError(self.path, *_changed(self._copy.identity[2], os.fstat(f.fileno()).st_size))
            except OSError as e:
                raise ModelFileError(self.path, f"can't be read ({e.strerror or e})") from None

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
        """Free the whole pages of bytes offset .. offset+nbytes: a backend that copied a weight to its
        own memory no longer needs them. The views already given read zeros there after (where the file
        itself is mapped, its bytes again); ``data`` reads them from the file again first."""
        page = mmap.PAGESIZE
        start, end = -(-offset // page) * page, (offset + nbytes) // page * page
        if end > start and hasattr(self._map, "madvise"):  # madvise: not on Windows
            self._map.madvise(self._release_advice, start, end - start)
            if self._release_advice == getattr(mmap, "MADV_REMOVE", None):
                with self._filling:
                    self._holes = _union([*self._holes, (start, end)])

    def array(self, name: str) -> np.ndarray:
        """The tensor dequantized to a float32 array of its logical shape (a copy, for small tensors such
        as position tables)."""
        source = self.tensor(name)
        values = source.read(0, source.shape[0] if source.shape else 1)  # from the file: the mapping needn't hold it
        if source.ggml_type == "Q8_0":
            values = q8_0_values(np.asarray(values).reshape(-1, Q8_0_BLOCK_BYTES))
        return np.array(values, dtype=np.float32).reshape(source.shape)

    def __repr__(self) -> str:
        return f"ModelFile({str(self.path)!r}, {self.get('general.architecture')!r}, {len(self._tensors)} tensors)"


class _Checks:
    """The checks of a model file's weights as a backend first reads them: each float value a number
    (F32, F16; a Q8_0 block's scale, by which its 32 values are multiplied), and a weight matrix (two axes
    or more) not all zeros (for Q8_0: all scales zero), and its bytes' CRC-32 the one recorded for it
    (``sums``, where there are). A ModelFileError names the first tensor that fails. A tensor passes
    once, whole or once its rows, read in parts, have all been seen (its sum where they came in order)."""

    def __init__(self, path: Path, sums: dict[str, int]):
        self.path = path
        self.sums = sums
        self._passed: set[str] = set()
        self._rows: dict[str, tuple[int, bool, int | None]] = {}  # rows seen, any not zero, their sum so far

    def whole(self, t: TensorInfo, raw: np.ndarray) -> None:
        """Check tensor ``t``'s bytes ``raw`` (uint8) whole."""
        if t.name not in self._passed:
            self._end(t, self._values(t, raw), zlib.crc32(raw) if t.name in self.sums else None)

    def rows(self, t: TensorInfo, raw: np.ndarray, start: int, stop: int, n_rows: int) -> None:
        """Check rows ``start .. stop`` of tensor ``t`` (of ``n_rows``), their bytes ``raw`` (uint8)."""
        if t.name in self._passed:
            return
        seen, nonzero, crc = self._rows.get(t.name, (0, False, 0))
        in_order = crc is not None and start == seen and t.name in self.sums
        seen, nonzero = seen + stop - start, self._values(t, raw) or nonzero
        crc = zlib.crc32(raw, crc) if in_order else None
        self._rows[t.name] = (seen, nonzero, crc)
        if seen >= n_rows:  # parts read twice (a second backend) count twice: the zeros' test is then lenient
            self._end(t, nonzero, crc)

    def _end(self, t: TensorInfo, nonzero: bool, crc: int | None) -> None:
        """Tensor ``t`` read whole: ``nonzero`` whether any value was not zero, ``crc`` its bytes' sum (None:
        not taken)."""
        if not nonzero and len(t.ne) > 1:
            raise ModelFileError(self.path, f"is damaged: its tensor '{t.name}' is all zeros")
        if crc is not None and crc != self.sums[t.name]:
            raise ModelFileError(self.path, f"is damaged: its tensor '{t.name}' isn't what was written (its "
                                 "checksum differs from the one recorded beside the file)")
        self._passed.add(t.name)

    def _values(self, t: TensorInfo, raw: np.ndarray) -> bool:
        """Whether any value of ``raw`` is not zero; a ModelFileError where a float isn't a number."""
        if t.ggml_type == "Q8_0":
            floats = raw.reshape(-1, Q8_0_BLOCK_BYTES)[:, :2].view(np.float16)  # the blocks' scales
        elif t.ggml_type in _DTYPES:
            floats = raw.view(_DTYPES[t.ggml_type])
        else:
            return True
        if not np.isfinite(floats).all():
            raise ModelFileError(self.path, f"is damaged: its tensor '{t.name}' holds values that aren't numbers "
                                 "(NaN or infinity)")
        return bool(floats.any())


def _open_unchanged(path: Path, identity: tuple[int, ...]) -> int:
    """A descriptor of the file at ``path`` if it is still the file of ``identity`` (``changes.identity``), else
    the ModelFileError that says what became of it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise ModelFileError(path, f"can't be read ({e.strerror or e})") from None
    now = os.fstat(fd)
    if file_identity(now) == identity:
        return fd
    os.close(fd)
    raise ModelFileError(path, *_changed(identity[2], now.st_size))


def _changed(size: int, now: int) -> tuple[str, str]:
    """ModelFileError's problem and hint for a file that changed after it was opened at ``size`` bytes
    and is ``now`` bytes long (the sizes said where they differ)."""
    return changed_problem(size, now), _CHANGED


def _union(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Byte ranges merged where they overlap or touch, sorted."""
    merged: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged

