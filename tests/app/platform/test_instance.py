"""One instance per data folder; ``sayso --toggle`` reaches it through a local socket."""

import os
import subprocess
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from support.cli import cli_env  # noqa: E402
from support.data import ROOT  # noqa: E402

from sayso.app.platform.instance import InstanceServer, send_command, server_name  # noqa: E402


def test_commands_reach_the_running_instance(qtbot, tmp_path):
    assert not send_command(tmp_path, "toggle")  # nobody listening yet
    server = InstanceServer(tmp_path)
    assert server.listen()
    try:
        with qtbot.waitSignal(server.command, timeout=5000) as received:
            assert send_command(tmp_path, "toggle")
        assert received.args == ["toggle"]
        with qtbot.waitSignal(server.command, timeout=5000) as received:
            assert send_command(tmp_path, "show")
        assert received.args == ["show"]
    finally:
        server.close()


def test_toggle_command_reaches_the_app_without_loading_the_engine(qtbot, tmp_path):
    """``sayso --toggle``, what a desktop shortcut runs, imports neither numpy nor the engine's models."""
    server = InstanceServer(tmp_path)
    assert server.listen()
    try:
        with qtbot.waitSignal(server.command, timeout=20_000) as received:
            toggle = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "sayso", "--toggle"],
                                      env=cli_env(tmp_path), stderr=subprocess.PIPE, text=True)
        assert received.args == ["toggle"]
        imports = toggle.communicate(timeout=20)[1]
        assert toggle.returncode == 0
    finally:
        server.close()
    imported = {line.rpartition("|")[2].strip() for line in imports.splitlines() if line.startswith("import time:")}
    assert "PySide6.QtNetwork" in imported
    engine_or_numerics = {m for m in imported if m.split(".")[0] in ("numpy", "wgpu") or m.startswith("sayso.engine")}
    assert engine_or_numerics <= {"sayso.engine", "sayso.engine.errors", "sayso.engine.models", "sayso.engine.catalogue"}


def test_files_opened_with_sayso_reach_the_running_app(qtbot, tmp_path):
    """What the desktop runs for files opened with Sayso (``Exec=sayso %F``): one ``open`` line each."""
    server = InstanceServer(tmp_path)
    assert server.listen()
    files = [tmp_path / "talk.wav", tmp_path / "a film.mp4"]
    for f in files:
        f.write_bytes(b"")
    received = []
    server.command.connect(received.append)
    try:
        opened = subprocess.Popen([sys.executable, "-m", "sayso", *map(str, files)], env=cli_env(tmp_path),
                                  stdout=subprocess.PIPE, text=True)
        qtbot.waitUntil(lambda: len(received) == 2, timeout=20_000)
        assert "Files page" in opened.communicate(timeout=20)[0] and opened.returncode == 0
    finally:
        server.close()
    assert received == [f"open {f}" for f in files]
    desktop = (ROOT / "packaging" / "io.github.sayso.Sayso.desktop").read_text()
    assert "Exec=sayso %F" in desktop and "audio/x-wav;" in desktop and "video/mp4;" in desktop


def test_the_socket_is_in_the_runtime_folder(qtbot, tmp_path, monkeypatch):
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    server = InstanceServer(tmp_path / "data")
    assert server.listen()
    try:
        (socket,) = runtime.iterdir()
        assert socket.is_socket() and socket.name.startswith("sayso-")
        with qtbot.waitSignal(server.command, timeout=5000):
            assert send_command(tmp_path / "data", "show")
    finally:
        server.close()


def test_each_data_folder_has_its_own_instance(tmp_path):
    assert server_name(tmp_path / "a") != server_name(tmp_path / "b")
    assert server_name(tmp_path / "a") == server_name(tmp_path / "a" / ".." / "a")


def test_a_stale_socket_does_not_block_a_new_instance(qtbot, tmp_path):
    first = InstanceServer(tmp_path)
    assert first.listen()
    first.close()
    second = InstanceServer(tmp_path)
    assert second.listen()
    second.close()
