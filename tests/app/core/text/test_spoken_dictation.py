"""Dictation from real speech: clips with spoken commands, made by espeak-ng, go through ``sayso transcribe
--dictation`` as a user runs it, with Whisper tiny.en and with Moonshine tiny, and come out as the
written text, exactly.

The voices, speeds and pauses were chosen so that both models hear every command word: with espeak-ng's
default voice at its default pace both models hear "comma" as "comment" or "Kama", tiny.en hears "full
stop" as "first up" and "scratch that" as "crash at"; a pause of half a second around each command (an
SSML break) and the voice each clip names make them words both models write. Each clip also passes with
pauses 100 ms shorter or longer, so a slightly different espeak-ng release shouldn't tip it over.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.cli import cli_env
from support.data import ROOT, TINY_EN_GGUF
from e2e.chat_server_double import ChatServerDouble, tidy
from sayso.app.cli import main
from sayso.app.core.settings import Settings, SettingsStore

REPLACEMENTS = "my email -> anna@example.com\n"


@dataclass(frozen=True)
class Clip:
    """What the voice says ("|" is a pause), and the text Sayso should write for it."""

    voice: str
    speed: int  # words a minute
    pause_ms: int
    said: str
    written: str


CLIPS = (
    Clip("en-us", 130, 500, "In short | comma | I will call you tomorrow | period | Can you come | question mark",
         "In short, I will call you tomorrow. Can you come?"),
    Clip("en-us", 120, 500, "Hello everyone | new line | the meeting is on Monday | period | new paragraph | "
                            "please write to my email | exclamation mark",
         "Hello everyone\nThe meeting is on Monday.\n\nPlease write to anna@example.com!"),
    Clip("en-gb-x-rp", 120, 500, "Please call me tomorrow | period | I will be at home | scratch that | "
                                 "I will be at work | period",
         "Please call me tomorrow. I will be at work."),
    Clip("en-gb", 130, 500, "We are closed on Sunday | full stop | See you on Monday | exclamation point",
         "We are closed on Sunday. See you on Monday!"),
)


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> list[Path]:
    """The wav files of ``CLIPS``, spoken by espeak-ng (required where ``CI`` is set)."""
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        why = "needs espeak-ng (apt-get install espeak-ng, or bash packaging/setup.sh --test)"
        if os.environ.get("CI"):
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    folder = tmp_path_factory.mktemp("spoken")
    paths = []
    for number, clip in enumerate(CLIPS):
        path = folder / f"clip{number}.wav"
        ssml = clip.said.replace("|", f"<break time='{clip.pause_ms}ms'/>")
        subprocess.run([espeak, "-m", "-w", str(path), "-s", str(clip.speed), "-v", clip.voice, ssml], check=True)
        paths.append(path)
    return paths


@pytest.fixture(params=["whisper-tiny.en", "moonshine-tiny"])
def model(request) -> Path:
    return TINY_EN_GGUF if request.param == "whisper-tiny.en" else request.getfixturevalue("moonshine_tiny")


def test_spoken_commands_and_replacements_give_the_written_text(model, clips, tmp_path):
    replacements = tmp_path / "replacements.txt"
    replacements.write_text(REPLACEMENTS, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "sayso", "transcribe", "--dictation", "--replacements", str(replacements),
         "--model", str(model), *map(str, clips)],
        cwd=ROOT, env=cli_env(tmp_path), capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "".join(f"{clip.written}\n" for clip in CLIPS)


def test_dictation_writes_by_the_saved_settings_as_the_app_does(clips, tmp_path):
    """Without options, ``--dictation`` takes the user's Settings: their replacements and the cleanup (here
    the chat server double); a cleanup that fails writes the rules' text and says why on stderr."""
    with ChatServerDouble() as chat:
        SettingsStore(tmp_path / "settings.json").save(Settings(
            replacements="tomorrow -> on Friday", cleanup=True, cleanup_url=chat.url, cleanup_timeout=3.0))
        chat.reply = lambda text: tidy(text).replace("Can you", "Could you")  # a model's own wording
        command = [sys.executable, "-m", "sayso", "transcribe", "--dictation", "--model", str(TINY_EN_GGUF),
                   str(clips[0])]  # fmt: skip
        done = subprocess.run(command, cwd=ROOT, env=cli_env(tmp_path), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        ruled = "In short, I will call you on Friday. Can you come?"
        assert chat.requests[0].user_text == ruled
        assert done.stdout == "In short, I will call you on Friday. Could you come?\n"
        chat.status, chat.error_message = 500, "out of memory"
        done = subprocess.run(command, cwd=ROOT, env=cli_env(tmp_path), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0 and done.stdout == ruled + "\n"
        assert "500" in done.stderr and "out of memory" in done.stderr


def test_dictation_refuses_a_format_other_than_plain_text(tmp_path, capsys):
    assert main(["transcribe", "--dictation", "--format", "srt", str(tmp_path / "any.wav")]) == 1
    assert "--dictation writes plain text; drop --format srt" in capsys.readouterr().err


def test_a_bad_replacements_file_is_refused_with_its_line_and_what_to_write(tmp_path, capsys):
    replacements = tmp_path / "words.txt"
    replacements.write_text("# mine\nmy email -> anna@example.com\nsay so Sayso\n", encoding="utf-8")
    code = main(["transcribe", "--dictation", "--replacements", str(replacements), str(tmp_path / "any.wav")])
    error = capsys.readouterr().err
    assert code == 1 and f"{replacements}: Line 3 has no '->'" in error and "e.g. 'jay son -> JSON'" in error


def test_replacements_without_dictation_are_refused(tmp_path, capsys):
    assert main(["transcribe", "--remove-fillers", str(tmp_path / "any.wav")]) == 1
    assert "add --dictation" in capsys.readouterr().err
