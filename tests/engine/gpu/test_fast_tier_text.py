"""Every family gives the same text with the fast tier on (the device's probes decide) and off
(``SAYSO_FAST=0``: every kernel portable), through the engine as the app loads it. Whisper's check,
clip by clip against numpy too, is in test_whisper_gpu.py."""

from __future__ import annotations

import pytest

from support.data import AUDIO
from sayso.engine.audio import load_audio
from sayso.engine.convert.random_model import write_random_model
from sayso.engine.engine import Engine
from sayso.engine.gpu.fast import FAST_ENV

pytestmark = pytest.mark.gpu
CLIP = "librivox/sense_and_sensibility_01_austen_64kb-0920.wav"  # one on which every random model has words


@pytest.fixture(scope="module")
def models(moonshine_tiny, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fast-tier")
    small = {family: write_random_model(family, folder / f"{family}.gguf", small=True, quantized=True)
             for family in ("parakeet-tdt-v3", "gigaam-v3-rnnt", "gigaam-v3-ctc")}
    return {"moonshine-tiny": moonshine_tiny, **small}


@pytest.mark.parametrize("family", ["moonshine-tiny", "parakeet-tdt-v3", "gigaam-v3-rnnt", "gigaam-v3-ctc"])
def test_fast_and_portable_tiers_give_one_text(models, family, monkeypatch):
    pcm = load_audio(AUDIO / CLIP)
    fast = Engine(models[family], device="gpu", vad=False)
    monkeypatch.setenv(FAST_ENV, "0")
    portable = Engine(models[family], device="gpu", vad=False)
    assert fast.ops.fast.versions and not portable.ops.fast.versions
    text = fast.transcribe(pcm).text
    print(f"\n{family}: {text[:80]}")
    assert text and portable.transcribe(pcm).text == text
