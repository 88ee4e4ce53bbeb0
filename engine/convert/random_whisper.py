"""Random-weight Whisper models in transcribe.cpp's Whisper layout, at every published shape, for
speed and agreement tests of the shapes whose real weights are not at hand (small, medium, large-v2,
large-v3, large-v3-turbo).

The file is written by the real converter (``engine.convert.whisper.write_whisper_gguf``) from a
``WhisperSource`` whose tensors are seeded draws and whose tokenizer is synthetic: the 256 byte tokens
in GPT-2's order, then letter strings built by merges (``Ġab`` = ``Ġa`` + ``b``), then Whisper's special
and timestamp tokens at their real ids. Weights are normal draws scaled by 1/sqrt(fan-in), queries and
keys drawn larger so attention is peaked, the token embedding (also the output head: Whisper ties them)
large enough that the best text token leads the next by a few logit units.

A random decoder with tied embeddings repeats itself (each token's own row is in the residual and
predicts it again), so the final norm's weights alternate in sign (a row's product with itself then
cancels) and every position adds a large random ``dec.pos_emb`` row (each favours other tokens): the
text is varied, and follows the audio through the encoder and cross-attention.

What a trained model decides from meaning, this one is made to decide exactly, so both engines take
the same path through Whisper's rules whatever the audio:

* Two channels of the decoder's final norm are constants: channel 0 is 1 (weight 0, bias 1), so an
  embedding row's channel 0 is that token's fixed logit; channel 1 carries only the position, +-``END_STEP``
  from ``dec.pos_emb`` (no block writes to it and no input token has it), so its sign flips exactly at
  ``END_POSITION``.
* End of text: ``<|endoftext|>``'s row is zero but for channel 1, so it loses by far before
  ``END_POSITION`` and wins by far from there: each window says ``END_POSITION`` less its prompt tokens.
* Timestamps: zero rows but ``<|0.00|>``'s fixed logit, so the first token (a timestamp by rule) is
  ``<|0.00|>`` and timestamps are never likelier than text after it.
* Language: the language rows are zero but ``<|en|>``'s fixed logit, so English is detected;
  ``<|nospeech|>`` is far below, so no window is skipped as silence.

The text tokens are still argmaxes over some 50,000 rows, so the two engines' rounding differs enough
to swap the best two at a near-tie now and then (most windows agree token for token); the tests
judge a difference by our lead at the first differing token. The vocabulary's merges build only
letter strings, and the model emits tokens in sequences that BPE would not produce from their text,
so transcribe.cpp's text of an earlier window, encoded again as a prompt, is not our token sequence:
compare single windows (up to 30 s).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sayso.engine.convert.random_model import ATTENTION_GAIN, HEAD_GAIN, Draw
from sayso.engine.convert.source import WhisperSource
from sayso.engine.convert.tokenizer import TIMESTAMP_STEP, TOKEN_CONTROL, TOKEN_NORMAL, Vocabulary
from sayso.engine.convert.whisper import tensor_layout, write_whisper_gguf
from sayso.engine.errors import SaysoError
from sayso.engine.whisper.tokenizer import bytes_to_unicode

# OpenAI's language order (whisper/tokenizer.py LANGUAGES): token ids follow it; v3 added "yue".
LANGUAGES = (
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th ur hr bg lt la mi "
    "ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr pa si km sn yo so af oc ka be tg sd "
    "gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt haw ln ha ba jw su yue"
).split()
ENGLISH_ONLY_VOCAB, MULTILINGUAL_VOCAB, V3_VOCAB = 51864, 51865, 51866
N_TIMESTAMPS = 1501  # <|0.00|> .. <|30.00|>
SYMBOL_BYTES = '"#()*+/:;<=>@[\\]^_`{|}~'  # byte tokens the suppress list names, as OpenAI's suppresses symbols

POSITION_GAIN = 1.0  # dec.pos_emb: each position favours other tokens, so the text never loops
OUTPUT_GAIN = 1.5  # final-norm scale: text logits a few tens at most, as a trained model's (above ~100
# transcribe.cpp picked token 0 at the first step)
END_POSITION = 48  # decoder position (prompt included) from which <|endoftext|> wins
END_STEP = 4.0  # channel 1 of dec.pos_emb: -END_STEP before END_POSITION, +END_STEP from it
END_GAIN = 100.0  # <|endoftext|>'s weight on channel 1: far above any text logit either way
FIXED_LOGITS = {"<|0.00|>": 1.0, "<|en|>": 30.0, "<|nospeech|>": -30.0, "<|nocaptions|>": -30.0}


@dataclass(frozen=True)
class Shape:
    d_model: int
    n_enc: int
    n_dec: int
    n_heads: int
    n_mels: int
    vocab: int


def _shapes() -> dict[str, Shape]:
    sizes = {"tiny": (384, 4, 6), "base": (512, 6, 8), "small": (768, 12, 12), "medium": (1024, 24, 16)}
    shapes = {}
    for size, (d, layers, heads) in sizes.items():
        shapes[f"whisper-{size}"] = Shape(d, layers, layers, heads, 80, MULTILINGUAL_VOCAB)
        shapes[f"whisper-{size}.en"] = Shape(d, layers, layers, heads, 80, ENGLISH_ONLY_VOCAB)
    shapes["whisper-large-v2"] = Shape(1280, 32, 32, 20, 80, MULTILINGUAL_VOCAB)
    shapes["whisper-large-v3"] = Shape(1280, 32, 32, 20, 128, V3_VOCAB)
    shapes["whisper-large-v3-turbo"] = Shape(1280, 32, 4, 20, 128, V3_VOCAB)
    return shapes


SHAPES = _shapes()
"""``--random`` name -> the published model's dimensions and vocabulary."""


def small_shape(shape: Shape) -> Shape:
    """Two encoder layers, d_model 64 (one decoder layer where the model has fewer than encoder layers,
    as turbo); mels and vocabulary as published, since they fix the file's frontend and tokenizer."""
    return Shape(64, 2, 2 if shape.n_dec == shape.n_enc else 1, 4, shape.n_mels, shape.vocab)


def whisper_vocabulary(n_vocab: int) -> Vocabulary:
    """A byte-level BPE vocabulary of ``n_vocab`` ids laid out as Whisper's (module docstring)."""
    if n_vocab not in (ENGLISH_ONLY_VOCAB, MULTILINGUAL_VOCAB, V3_VOCAB):
        raise SaysoError(f"No Whisper vocabulary has {n_vocab} ids.")
    eot = 50256 if n_vocab == ENGLISH_ONLY_VOCAB else 50257
    encoder = bytes_to_unicode()
    # GPT-2's first ids: the bytes that are their own character, then the others (shifted past 255)
    byte_tokens = sorted(encoder.values(), key=lambda c: (ord(c) > 255, ord(c)))
    tokens, merges = list(byte_tokens), []
    known = set(tokens)
    letters = "abcdefghijklmnopqrstuvwxyz"
    space = encoder[ord(" ")]
    level = [space + c for c in letters] + list(letters)  # the strings of the previous length
    new = [space + c for c in letters]  # "Ġa": merged from "Ġ" and "a"
    while len(tokens) < eot:
        for text in new:
            if len(tokens) == eot:
                break
            if text not in known:
                tokens.append(text)
                known.add(text)
                merges.append(f"{text[:-1]} {text[-1]}")
        new = [prefix + c for prefix in level for c in letters]
        level = new
    n_languages = 100 if n_vocab == V3_VOCAB else 99
    specials = ["<|endoftext|>", "<|startoftranscript|>"] + [f"<|{code}|>" for code in LANGUAGES[:n_languages]]
    specials += ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>",
                 "<|nospeech|>" if n_vocab == V3_VOCAB else "<|nocaptions|>", "<|notimestamps|>"]
    stamps = [f"<|{i * TIMESTAMP_STEP:.2f}|>" for i in range(N_TIMESTAMPS)]
    types = [TOKEN_NORMAL] * len(tokens) + [TOKEN_CONTROL] * len(specials) + [TOKEN_NORMAL] * len(stamps)
    return Vocabulary(tokens + specials + stamps, types, merges)


def random_whisper_source(name: str, small: bool = False, seed: int = 0) -> WhisperSource:
    """The drawn model of the published Whisper ``name`` (a key of ``SHAPES``)."""
    if name not in SHAPES:
        raise SaysoError(f"Unknown Whisper shape {name!r}; use one of {', '.join(SHAPES)}.")
    shape = small_shape(SHAPES[name]) if small else SHAPES[name]
    vocab = whisper_vocabulary(shape.vocab)
    draw = Draw(np.random.default_rng(seed))
    d = shape.d_model
    layout = tensor_layout(d, shape.n_mels, 4 * d, 4 * d, shape.n_enc, shape.n_dec, 1500, 448, shape.vocab)
    tensors = {}
    for tensor, dims in layout:
        tensors[tensor] = _draw_tensor(draw, tensor, dims)
    tensors["enc.pos_emb.weight"] = _sinusoids(1500, d)
    _wire_decisions(tensors, vocab, shape)
    suppress = [vocab.id(c) for c in SYMBOL_BYTES]
    suppress += [vocab.id(t) for t in ("<|startoftranscript|>", "<|translate|>", "<|transcribe|>", "<|startoflm|>",
                                       "<|startofprev|>")]
    return WhisperSource(
        path=Path(f"random:{name}"), tensors=tensors, encoder_heads=shape.n_heads, decoder_heads=shape.n_heads,
        activation="gelu", scale_embedding=False, vocabulary=vocab, suppress_tokens=sorted(suppress),
        begin_suppress_tokens=[vocab.id(bytes_to_unicode()[ord(" ")]), vocab.id("<|endoftext|>")],
    )


def write_random_whisper(name: str, out: str | Path, small: bool = False, seed: int = 0,
                         out_type: str = "f16") -> Path:
    """Write the random model of the Whisper shape ``name`` to ``out`` (``f16`` or ``q8_0`` matrices,
    as the converter writes real ones); returns ``out``."""
    source = random_whisper_source(name, small, seed)
    return write_whisper_gguf(source, Path(out), out_type, variant=name)


def _draw_tensor(draw: Draw, name: str, shape: tuple[int, ...]) -> np.ndarray:
    leaf = name.rsplit(".", 2)[-2] if name.endswith((".weight", ".bias")) else name
    if name.endswith(".bias"):
        return draw.small(shape[0])
    if leaf.startswith("norm") or name.endswith("final_norm.weight"):
        return draw.normal(shape, 0.02, mean=1.0)
    if name.startswith("enc.conv."):
        return draw.normal(shape, 1.0 / np.sqrt(shape[1] * shape[2]))
    if name == "dec.token_embd.weight":
        return draw.normal(shape, HEAD_GAIN / np.sqrt(shape[1]))
    if name == "dec.pos_emb.weight":
        return draw.normal(shape, POSITION_GAIN)
    if leaf in ("q", "k"):
        return draw.linear(*shape, gain=ATTENTION_GAIN)
    return draw.linear(*shape)


def _sinusoids(length: int, channels: int) -> np.ndarray:
    """Whisper's encoder positions: sines then cosines of geometrically spaced timescales."""
    increment = np.log(10000) / (channels // 2 - 1)
    scaled = np.arange(length)[:, None] * np.exp(-increment * np.arange(channels // 2))[None, :]
    return np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1).astype(np.float32)


def _wire_decisions(t: dict[str, np.ndarray], vocab: Vocabulary, shape: Shape) -> None:
    """The constant channels and fixed rows of the module docstring."""
    embedding = t["dec.token_embd.weight"]
    embedding[:, :2] = 0.0  # no token writes to the constant channels
    # Tied embeddings would make every token predict itself (its own row is in the residual): final-norm
    # weights of alternating sign cancel a row's product with itself, so the blocks' outputs decide.
    t["dec.final_norm.weight"][:] = np.where(np.arange(shape.d_model) % 2, -OUTPUT_GAIN, OUTPUT_GAIN)
    t["dec.final_norm.weight"][:2] = (0.0, 1.0)  # channel 0: always 1; channel 1: the position's sign
    t["dec.final_norm.bias"][:2] = (1.0, 0.0)
    positions = t["dec.pos_emb.weight"]
    positions[:, 1] = np.where(np.arange(len(positions)) < END_POSITION, -END_STEP, END_STEP)
    for i in range(shape.n_dec):  # the blocks' outputs leave channel 1 alone
        for part in ("self_attn.out", "cross_attn.out", "ffn.fc2"):
            t[f"dec.blocks.{i}.{part}.weight"][1] = 0.0
            t[f"dec.blocks.{i}.{part}.bias"][1] = 0.0
    eot = vocab.id("<|endoftext|>")
    first_stamp = vocab.id("<|notimestamps|>") + 1
    embedding[eot] = 0.0
    embedding[eot, 1] = END_GAIN
    embedding[first_stamp:] = 0.0
    sot = vocab.id("<|startoftranscript|>")
    embedding[sot + 1 : vocab.id("<|translate|>")] = 0.0  # languages: English by its fixed logit below
    for token, logit in FIXED_LOGITS.items():
        i = vocab.id(token)
        if i is not None:
            embedding[i] = 0.0
            embedding[i, 0] = logit
