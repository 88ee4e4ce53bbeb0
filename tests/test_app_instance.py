"""One instance per data folder; ``sayso --toggle`` reaches it through a local socket."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from app.instance import InstanceServer, send_command, server_name  # noqa: E402


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
