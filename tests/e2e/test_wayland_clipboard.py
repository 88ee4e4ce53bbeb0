"""The Wayland clipboard through data control (app/platform/data_control.py) on a real compositor (a
headless sway, which offers wlroots' zwlr_data_control_v1): every type a Qt app copied read at once and
set back, a hung owner reported within the timeout, a clipboard past the size limit refused whole, a
copy made meanwhile never overwritten."""

import os
import signal
import subprocess
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

from e2e.fixtures import sway  # noqa: E402, F401
from e2e.services import require  # noqa: E402
from e2e.target import OWN_TYPE, copied_in_a_wayland_app  # noqa: E402
from sayso.app.platform.data_control import (  # noqa: E402
    ClipboardUnreadable,
    DataControlClipboard,
    DataControlUnavailable,
    text_contents,
)


def wayland_env(sway) -> dict[str, str]:
    return {"QT_QPA_PLATFORM": "wayland", "WAYLAND_DISPLAY": sway.display, "DISPLAY": "", "XDG_SESSION_TYPE": ""}


def wl_paste(sway, *args: str) -> bytes:
    return subprocess.run(["wl-paste", *args], env={**os.environ, **wayland_env(sway)}, capture_output=True,
                          check=True, timeout=10).stdout  # fmt: skip


def listed_types(sway) -> list[str]:
    return wl_paste(sway, "--list-types").decode().split()


def has_selection(sway) -> bool:
    env = {**os.environ, **wayland_env(sway)}
    return subprocess.run(["wl-paste", "--list-types"], env=env, capture_output=True, timeout=10).returncode == 0


@pytest.fixture(scope="module")
def clipboard(sway):
    """One data-control client for the module, as Sayso's process keeps one."""
    client = DataControlClipboard(sway.display)
    yield client
    client.close()


def test_every_type_an_app_copied_is_read_and_set_back_byte_for_byte(sway, clipboard):
    require("wl-copy", "wl-paste", "wtype")
    window = copied_in_a_wayland_app("sayso-clipboard-owner", wayland_env(sway))
    try:
        types = listed_types(sway)
        assert {"text/plain", "image/png", OWN_TYPE} <= set(types)
        started = time.monotonic()
        contents = clipboard.read().result(timeout=10)
        print(f"\nread {len(contents)} types, {sum(map(len, contents.values()))} bytes from a Qt app: "
              f"{(time.monotonic() - started) * 1000:.0f} ms")  # fmt: skip
        assert list(contents) == types
        assert contents[OWN_TYPE] == b"copied in the target"
        assert contents["text/plain;charset=utf-8"] == b"what the user copied"
        assert all(contents[t] == wl_paste(sway, "--no-newline", "--type", t) for t in ["image/png", "image/bmp"])

        subprocess.run(["wl-copy"], input=b"something else", env={**os.environ, **wayland_env(sway)}, check=True,
                       timeout=10)  # fmt: skip
        assert clipboard.put(contents).result(timeout=10) is not None
        assert listed_types(sway) == types
        for mime_type, data in contents.items():
            assert wl_paste(sway, "--no-newline", "--type", mime_type) == data, mime_type
        assert clipboard.read().result(timeout=10) == contents  # served from this process to itself
    finally:
        window.close()


def test_a_clipboard_whose_owner_hangs_is_reported_unreadable_within_the_timeout(sway, clipboard):
    require("wl-copy", "wl-paste", "wtype")
    window = copied_in_a_wayland_app("sayso-clipboard-hung-owner", wayland_env(sway))
    os.kill(window.process.pid, signal.SIGSTOP)  # a hung app: it never writes what is asked of it
    try:
        started = time.monotonic()
        with pytest.raises(ClipboardUnreadable):
            clipboard.read(timeout=0.3).result(timeout=10)
        assert 0.3 <= time.monotonic() - started < 2
    finally:
        os.kill(window.process.pid, signal.SIGCONT)
        window.close()
    assert clipboard.put(text_contents("still working")).result(timeout=10) is not None  # no harm done
    assert wl_paste(sway, "--no-newline") == b"still working"


def test_contents_go_back_only_over_the_selection_they_were_to_replace(sway, clipboard):
    """A restore after a paste: what another client copied in the meantime stays."""
    require("wl-copy", "wl-paste")
    pasted = clipboard.put(text_contents("the dictated text")).result(timeout=10)
    assert {"text/plain;charset=utf-8", "UTF8_STRING"} <= set(listed_types(sway))
    assert wl_paste(sway, "--no-newline") == b"the dictated text"
    subprocess.run(["wl-copy"], input=b"copied meanwhile", env={**os.environ, **wayland_env(sway)}, check=True,
                   timeout=10)  # fmt: skip
    assert clipboard.put({"text/plain": b"the old clipboard"}, over=pasted).result(timeout=10) is None
    assert pasted.replaced.is_set() and wl_paste(sway, "--no-newline") == b"copied meanwhile"

    pasted = clipboard.put(text_contents("the dictated text")).result(timeout=10)
    assert clipboard.put({}, over=pasted).result(timeout=10) is not None  # the clipboard was empty before
    assert not has_selection(sway)


def test_a_clipboard_past_the_size_limit_is_unreadable_rather_than_held_in_part(sway, clipboard, monkeypatch):
    from sayso.app.platform import data_control

    clipboard.put({"text/plain": b"small", "application/octet-stream": bytes(5000)}).result(timeout=10)
    monkeypatch.setattr(data_control, "READ_LIMIT_BYTES", 4096)
    with pytest.raises(ClipboardUnreadable, match="more than 4096 bytes"):
        clipboard.read().result(timeout=10)


def test_without_a_compositor_data_control_says_it_is_unavailable(tmp_path):
    clipboard = DataControlClipboard(str(tmp_path / "wayland-9"))
    with pytest.raises(DataControlUnavailable, match="no Wayland compositor"):
        clipboard.read().result(timeout=10)
    clipboard.close()


def test_doctor_says_paste_keeps_every_type_where_the_compositor_offers_data_control(sway, monkeypatch, tmp_path):
    """``sayso doctor`` asks the compositor as a paste does: sway offers data control; with no compositor
    to reach, paste goes through wl-clipboard."""
    from sayso.app import doctor

    require("wl-copy", "wl-paste", "wtype")
    for name, value in wayland_env(sway).items():
        monkeypatch.setenv(name, value)
    lines = doctor.text_delivery()
    assert f"{doctor.OK}Paste gives your clipboard back in every type: the compositor offers data control " \
           "(zwlr_data_control_manager_v1)." in lines  # fmt: skip
    assert f"{doctor.OK}wtype presses Ctrl+V and types the text in other apps." in lines
    monkeypatch.setenv("WAYLAND_DISPLAY", str(tmp_path / "wayland-9"))
    (clipboard,) = [line for line in doctor.text_delivery() if line.startswith(f"{doctor.OK}Paste")]
    assert "in one type" in clipboard and "wl-clipboard: no Wayland compositor to connect to" in clipboard


def test_a_clipboard_keeper_given_contents_cut_short_leaves_the_clipboard_alone(sway, clipboard):
    """The keeper Sayso leaves at quit (``sayso --keep-clipboard``): when the contents on its standard
    input end early, it sets nothing and exits."""
    clipboard.put(text_contents("copied before")).result(timeout=10)
    header = b'[["text/plain", 10], ["image/png", 5000]]\n'
    keeper = subprocess.run([sys.executable, "-m", "sayso", "--keep-clipboard"], input=header + b"cut short",
                            env={**os.environ, **wayland_env(sway)}, capture_output=True, timeout=10)  # fmt: skip
    assert keeper.returncode == 1 and b"the contents came incomplete" in keeper.stderr
    assert wl_paste(sway, "--no-newline") == b"copied before"
