"""The overlay's Wayland surface (``app.platform.layer_shell``) on real Wayland servers: sway, whose
screenshot (grim) shows the frames where the layer shell puts them, and a server that offers no layer
shell (libwayland-server through pywayland, with only wl_compositor and wl_shm, like a compositor
without wlr-layer-shell), where there is no overlay: ``can_float`` is false."""

from __future__ import annotations

import os
import select
import threading
import time

import numpy as np
import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import Qt  # noqa: E402

from e2e.fixtures import sway  # noqa: E402, F401
from sayso.app.platform.layer_shell import LayerSurface, advertised_interfaces, offers_layer_shell  # noqa: E402
from sayso.app.ui import overlay  # noqa: E402

RED, BLUE = (255, 0, 0), (0, 0, 255)


def argb(color: tuple[int, int, int], width: int, height: int) -> bytes:
    """Opaque pixels of one colour as wl_shm's ARGB8888 lays them out in memory (little-endian: B, G, R, A)."""
    red, green, blue = color
    return bytes([blue, green, red, 255]) * (width * height)


def shows(sway, surface: LayerSurface, path, box: tuple[int, int, int, int], color, timeout: float = 10) -> bool:
    """Whether the screen shows ``color`` exactly in ``box`` (left, top, right, bottom) and nowhere around
    it, once the compositor has had the surface's events handled (up to ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        if select.select([surface.fileno()], [], [], 0.05)[0]:
            surface.read()
        pixels = sway.screenshot(path)
        left, top, right, bottom = box
        inside = np.all(pixels[top:bottom, left:right] == color)
        around = np.concatenate([pixels[top - 1, left:right], pixels[bottom, left:right],
                                 pixels[top:bottom, left - 1], pixels[top:bottom, right]])  # fmt: skip
        if inside and not np.any(np.all(around == color, axis=-1)) or time.monotonic() > deadline:
            return bool(inside)


def test_a_layer_surface_is_drawn_at_the_bottom_centre_of_sways_output_and_is_no_window(sway, monkeypatch, tmp_path):
    monkeypatch.setenv("WAYLAND_DISPLAY", sway.display)
    assert offers_layer_shell(advertised_interfaces())
    surface = LayerSurface("sayso-test", bottom_margin=72)
    try:
        width, height = sway.screenshot(tmp_path / "empty.png").shape[1::-1]
        surface.show(argb(RED, 400, 60), 400, 60)
        centre, bottom = width // 2, height - 72
        assert shows(sway, surface, tmp_path / "red.png", (centre - 200, bottom - 60, centre + 200, bottom), RED)
        assert not [w for w in sway.windows() if w["pid"] == os.getpid()]  # the layer isn't in sway's tree

        surface.show(argb(BLUE, 240, 80), 240, 80, scale=2)  # a new size, and two buffer pixels a surface pixel
        assert shows(sway, surface, tmp_path / "blue.png", (centre - 60, bottom - 40, centre + 60, bottom), BLUE)

        surface.hide()
        assert not shows(sway, surface, tmp_path / "hidden.png", (centre - 60, bottom - 40, centre + 60, bottom),
                         BLUE, timeout=0.5)  # fmt: skip
    finally:
        surface.close()


@pytest.fixture
def compositor_without_layer_shell(tmp_path, monkeypatch):
    """A Wayland server with wl_compositor and wl_shm but no zwlr_layer_shell_v1; its socket's path."""
    from pywayland.protocol.wayland import WlCompositor
    from pywayland.server import Display

    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    display = Display()
    socket = display.add_socket()
    compositor = WlCompositor.global_class(display)  # kept: the global lives as long as this object
    display.init_shm()
    serving = threading.Thread(target=display.run, daemon=True)
    serving.start()
    yield str(runtime / socket)
    display.terminate()
    serving.join(timeout=10)
    compositor.destroy()
    display.destroy()


def test_a_compositor_without_the_layer_shell_gets_no_overlay(compositor_without_layer_shell, monkeypatch, qtbot):
    """No layer surface, ``can_float`` false, and the overlay widget never a window of its own."""
    monkeypatch.setenv("WAYLAND_DISPLAY", compositor_without_layer_shell)
    assert advertised_interfaces() >= {"wl_compositor", "wl_shm"}
    assert not offers_layer_shell(advertised_interfaces())
    with pytest.raises(ValueError, match="no layer shell"):
        LayerSurface("sayso-test", bottom_margin=72)

    monkeypatch.setattr(overlay, "on_wayland", lambda: True)
    overlay._compositor_offers_layer_shell.cache_clear()  # the answer is read once a process
    try:
        assert not overlay.can_float()
        widget = overlay.Overlay()
        qtbot.addWidget(widget)
        assert widget.layer_mirror is None and widget.testAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen)
    finally:
        overlay._compositor_offers_layer_shell.cache_clear()


def test_no_compositor_at_all_offers_no_layer_shell(tmp_path, monkeypatch):
    monkeypatch.setenv("WAYLAND_DISPLAY", str(tmp_path / "no-such-socket"))
    assert advertised_interfaces() == set()
