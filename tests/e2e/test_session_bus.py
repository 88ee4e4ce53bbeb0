"""The tests' private session bus: no service installed on the machine can start on it, so a portal double
is the only portal the tests meet, whatever the machine has installed."""

import subprocess
import sys
import textwrap

from e2e.services import start_session_bus

FAKE_PORTAL = "org.freedesktop.portal.Desktop"


def test_the_private_bus_activates_no_service_installed_on_the_machine(tmp_path, monkeypatch):
    """A service file where the desktop's are looked for (``$XDG_DATA_DIRS/dbus-1/services``), as an
    installed xdg-desktop-portal leaves one: the bus neither lists it nor starts it."""
    services = tmp_path / "share" / "dbus-1" / "services"
    services.mkdir(parents=True)
    started = tmp_path / "started"
    (services / f"{FAKE_PORTAL}.service").write_text(
        f"[D-BUS Service]\nName={FAKE_PORTAL}\nExec=/bin/sh -c 'touch {started}'\n")
    monkeypatch.setenv("XDG_DATA_DIRS", str(tmp_path / "share"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    bus = start_session_bus()
    try:
        asked = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
            from jeepney import DBusAddress, new_method_call, message_bus
            from jeepney.io.blocking import open_dbus_connection
            with open_dbus_connection(bus="{bus.address}") as bus:
                print(" ".join(bus.send_and_get_reply(message_bus.ListActivatableNames()).body[0]))
                ping = new_method_call(DBusAddress("/", bus_name="{FAKE_PORTAL}", interface="org.freedesktop.DBus.Peer"),
                                       "Ping")
                print(bus.send_and_get_reply(ping, timeout=5).header.message_type.name)
        """)], capture_output=True, text=True, timeout=30)
        names, answer = asked.stdout.splitlines()
        assert FAKE_PORTAL not in names.split() and answer == "error", (asked.stdout, asked.stderr)
        assert not started.exists()  # the call found no owner and started nothing
    finally:
        bus.stop()
