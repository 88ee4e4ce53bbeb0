"""Each tensor's checksum, recorded beside a model file when it is written or downloaded (``NAME.gguf.crc32``) and
checked as the weights are read (``reader``): a weight damaged on the disk or in a copy is named at load,
not heard as a transcript of one word repeated. Beside the file rather than in its metadata, so that a
converted file stays byte for byte the one transcribe.cpp's converter writes; files without it (from
transcribe.cpp, or copied without it) are checked for values that can't be weights only.

The sums are CRC-32 (zlib), which finds flipped bits and overwritten blocks at several GB/s; they are no
defence against a forgery, which needs none here."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

from gguf import GGUFReader

from sayso.engine.files import write_text_atomically

SUFFIX = ".crc32"


def sums_path(model: Path) -> Path:
    return model.with_name(model.name + SUFFIX)


def write_sums(model: Path, sums: dict[str, int]) -> None:
    """Record ``sums`` (tensor name: CRC-32 of its bytes) beside ``model``, with its size."""
    record = {"size": model.stat().st_size, "crc32": sums}
    write_text_atomically(sums_path(model), json.dumps(record, indent=0) + "\n")


def record_sums(model: Path) -> None:
    """Record the sums of a file written elsewhere, each tensor's bytes as the file holds them: a download,
    once its sha256 is the one the hub publishes, so that a later change on the disk is named at load."""
    tensors = GGUFReader(model).tensors
    write_sums(model, {t.name: zlib.crc32(t.data.tobytes()) for t in tensors})


def read_sums(model: Path, size: int) -> dict[str, int]:
    """The sums recorded beside ``model`` when it was ``size`` bytes long; none where there are none, or
    they are another file's (a model written over since), or can't be read."""
    try:
        record = json.loads(sums_path(model).read_text(encoding="utf-8"))
        if record.get("size") == size and isinstance(record.get("crc32"), dict):
            return {str(name): int(crc) for name, crc in record["crc32"].items()}
    except (OSError, ValueError, TypeError, AttributeError):
        pass
    return {}
