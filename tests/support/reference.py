"""transcribe.cpp's results for a model file and audio: what the engine's are compared with."""

from __future__ import annotations

import numpy as np


def reference_tokens(path, pcm) -> tuple[list[tuple[int, int]], str]:
    """transcribe.cpp's token ids with their start times (ms), and its text, for a model file and audio."""
    import transcribe_cpp

    from sayso.engine import reference

    result = reference.transcribe(transcribe_cpp.Model(str(path)), pcm)
    return [(t.id, t.t0_ms) for t in result.tokens], result.text


def reference_dumps(model_path, pcm, folder) -> tuple[dict[str, np.ndarray], list[tuple[int, int]]]:
    """transcribe.cpp's dumped tensors (name -> array) and its tokens (id, start ms) for ``pcm``."""
    from sayso.engine.accuracy import transcribe_cpp_run

    dumps, tokens, _ = transcribe_cpp_run(model_path, pcm, folder)
    return dumps, tokens
