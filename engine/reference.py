"""transcribe.cpp, the reference engine, run as Sayso decodes: what ``engine.accuracy``, ``sayso bench``
and the tests compare with.

Sayso decodes a Whisper window greedily (``engine.whisper.decode``). transcribe.cpp, as whisper.cpp
does, decodes a window again at rising temperatures where its greedy text fails the quality checks,
sampling with a seed drawn afresh on each run: on a clip it is unsure of, each run gave another text,
so a comparison with it was a comparison with a random draw. Asked for no temperature steps it decodes
greedily, as Sayso does, and gives the same text every time. Its Python binding reads long audio without
the text before each window; asked to condition on it, it reads long audio as Sayso does
(``engine.windows``). Other families have no such fallback and run with transcribe.cpp's defaults.
"""

from __future__ import annotations


def run_options(model) -> dict:
    """Keyword arguments for ``Session.run`` of the ``transcribe_cpp.Model`` ``model`` that make it decode
    as Sayso does."""
    import transcribe_cpp

    if model.arch == "whisper":
        return {"family": transcribe_cpp.WhisperRunOptions(temperature_inc=0.0, condition_on_prev_tokens=True)}
    return {}


def transcribe(model, pcm, **options):
    """transcribe.cpp's ``Result`` for 16 kHz mono ``pcm`` in a new session of ``model``, decoded as Sayso
    decodes; ``options`` go to ``Session.run`` as well (``prompt``, ``prefix``)."""
    return model.session().run(pcm, **run_options(model), **options)
