"""pytest fixtures over services.py: one Xvfb and one PulseAudio for the whole test session.

Import the fixtures a test module uses by name (``from e2e.fixtures import x_display``). The services
are started once per session, whichever module asks first, and stopped when the session ends.
"""

from __future__ import annotations

import atexit

import pytest

from e2e.portal import PortalDouble
from e2e.services import (
    Pulse,
    SessionBus,
    Sway,
    SystemTray,
    XServer,
    start_pulse,
    start_session_bus,
    start_sway,
    start_tray,
    start_xvfb,
)

_started: dict[str, XServer | Pulse | SystemTray | SessionBus | Sway] = {}


def _once(name: str, start):
    if name not in _started:
        _started[name] = start()
        atexit.register(_started[name].stop)
    return _started[name]


@pytest.fixture
def x_display(monkeypatch) -> str:
    """An X display (Xvfb if none is running), set as $DISPLAY for this test and its subprocesses."""
    server = _once("x", start_xvfb)
    monkeypatch.setenv("DISPLAY", server.display)
    monkeypatch.setenv("XDG_SESSION_TYPE", "x11")
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    return server.display


@pytest.fixture(scope="module")
def sway() -> Sway:
    """A headless sway compositor; apps reach it with WAYLAND_DISPLAY=sway.display."""
    return _once("sway", start_sway)


@pytest.fixture
def pulse(monkeypatch) -> Pulse:
    """PulseAudio with the vsink null sink (its monitor is the default microphone), in this test's env."""
    sound = _once("pulse", start_pulse)
    for key, value in sound.env.items():
        monkeypatch.setenv(key, value)
    return sound


@pytest.fixture(scope="module")
def desktop():
    """Xvfb and PulseAudio for a whole module (an app process shared by its tests), in os.environ."""
    x, sound = _once("x", start_xvfb), _once("pulse", start_pulse)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DISPLAY", x.display)
        patch.setenv("XDG_SESSION_TYPE", "x11")
        patch.delenv("WAYLAND_DISPLAY", raising=False)
        for key, value in sound.env.items():
            patch.setenv(key, value)
        yield sound


@pytest.fixture(scope="module")
def system_tray(desktop) -> SystemTray:
    """A system tray (trayer's panel) on the desktop's X display, for apps started after it."""
    return _once("tray", lambda: start_tray(_started["x"].display))


@pytest.fixture
def session_bus(monkeypatch) -> SessionBus:
    """A private D-Bus session bus (one per test session), set as this test's session bus."""
    bus = _once("bus", start_session_bus)
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", bus.address)
    return bus


@pytest.fixture
def portal(session_bus) -> PortalDouble:
    """A GlobalShortcuts portal double on the private session bus."""
    double = PortalDouble()
    yield double
    double.close()
