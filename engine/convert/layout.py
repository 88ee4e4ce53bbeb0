"""What the converters to transcribe.cpp's layouts (``whisper``, ``moonshine``) share: the output
types, the check of a source's weights against a family's tensor layout, the ``general.*`` and
``stt.capability.*`` keys every file opens with, the tokenizer arrays it ends with, and the writing
of the tensors in layout order with progress reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from sayso.engine.convert.tokenizer import Vocabulary
from sayso.engine.errors import ModelFileError, SaysoError
from sayso.engine.gguf.writer import Meta, TensorOut, write_gguf

Progress = Callable[[float, str], None]
"""Called with the fraction done (0..1) and what is happening, for a progress bar."""

OUTPUT_TYPES = {"f16": 1, "q8_0": 7}
"""Output type -> ``general.file_type`` (llama.cpp's MOSTLY_F16, MOSTLY_Q8_0)."""

Layout = list[tuple[str, tuple[int, ...]]]
"""Every model tensor in file order with its numpy shape."""


def check_out_type(out_type: str) -> None:
    if out_type not in OUTPUT_TYPES:
        raise SaysoError(f"Unknown output type {out_type!r}; use one of {', '.join(OUTPUT_TYPES)}.")


def shape_reader(source) -> Callable[[str], tuple[int, ...]]:
    """``shape(name)`` of a weight of ``source`` (its ``tensors`` dict), a ModelFileError when it has none."""

    def shape(name: str) -> tuple[int, ...]:
        if name not in source.tensors:
            raise ModelFileError(source.path, f"has no weight for {name}")
        return source.tensors[name].shape

    return shape


def check_shapes(source, layout: Layout) -> None:
    """A ModelFileError naming the first weight of ``layout`` that ``source`` lacks or has in another shape."""
    shape = shape_reader(source)
    for name, expected in layout:
        if shape(name) != expected:
            raise ModelFileError(source.path, f"weight {name} has shape {list(shape(name))}, expected {list(expected)}")


def parameter_count(layout: Layout) -> int:
    return sum(int(np.prod(s)) for _, s in layout)


def size_label(n_params: int) -> str:
    """``general.size_label`` from the parameter count: ``38M``, ``1.6B``."""
    if n_params >= 1_000_000_000:
        return f"{n_params / 1e9:.1f}B"
    return f"{n_params / 1e6:.0f}M" if n_params >= 1_000_000 else f"{n_params / 1e3:.0f}K"


def general_metadata(name: str, basename: str, n_params: int, author: str, organization: str,
                     license_id: str, license_name: str, license_link: str, out_type: str,
                     languages: list[str], variant: str, lang_detect: bool, translate: bool,
                     timestamps: bool) -> list[Meta]:  # fmt: skip
    """The keys a file opens with, in transcribe.cpp's order: ``general.*``, ``stt.variant``, ``stt.capability.*``."""
    return [
        Meta("general.name", "STRING", name),
        Meta("general.basename", "STRING", basename),
        Meta("general.size_label", "STRING", size_label(n_params)),
        Meta("general.author", "STRING", author),
        Meta("general.organization", "STRING", organization),
        Meta("general.license", "STRING", license_id),
        Meta("general.license.name", "STRING", license_name),
        Meta("general.license.link", "STRING", license_link),
        Meta("general.file_type", "UINT32", OUTPUT_TYPES[out_type]),
        Meta("general.languages", "ARRAY[STRING]", languages),
        Meta("stt.variant", "STRING", variant),
        Meta("stt.capability.lang_detect", "BOOL", lang_detect),
        Meta("stt.capability.translate", "BOOL", translate),
        Meta("stt.capability.timestamps", "BOOL", timestamps),
    ]


def vocabulary_metadata(vocab: Vocabulary) -> list[Meta]:
    """The bulk tokenizer arrays, last in a file as transcribe.cpp's converter puts them."""
    return [
        Meta("tokenizer.ggml.tokens", "ARRAY[STRING]", vocab.tokens),
        Meta("tokenizer.ggml.token_type", "ARRAY[INT32]", vocab.types),
        Meta("tokenizer.ggml.merges", "ARRAY[STRING]", vocab.merges),
    ]


def write_layout(out: Path, architecture: str, metadata: list[Meta], source, layout: Layout,
                 tensor_type: Callable[[str, tuple[int, ...], str], str], out_type: str,
                 progress: Progress | None, leading: Sequence[TensorOut] = ()) -> Path:  # fmt: skip
    """Write ``leading`` tensors then ``source``'s weights in ``layout`` order, each in the GGUF type
    ``tensor_type(name, shape, out_type)`` gives it, to ``out`` (atomically), reporting progress; returns ``out``."""
    report = progress or (lambda fraction, message: None)
    tensors = list(leading)
    for i, (name, s) in enumerate(layout):
        if i % 16 == 0:
            report(0.1 + 0.7 * i / len(layout), f"Converting {name}")
        tensors.append(TensorOut(name, source.tensors[name], tensor_type(name, s, out_type)))
    report(0.8, f"Writing {out.name}")
    write_gguf(out, architecture, metadata, tensors)
    report(1.0, f"Wrote {out}")
    return out
