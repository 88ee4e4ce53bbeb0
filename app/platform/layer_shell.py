"""A surface on the compositor's overlay layer (wlr-layer-shell): pixels that float above every window on
Wayland without taking the keyboard focus, the pointer or any space.

Qt has no layer-shell API, so this opens a Wayland connection of its own (pywayland) next to Qt's and
shows what the caller drew: ARGB8888 pixels (a QImage in Format_ARGB32_Premultiplied on a little-endian
machine) copied into shared memory. The surface is anchored to the bottom edge, centred, above
whatever panel reserves that edge (exclusive zone 0), takes no keyboard focus (keyboard interactivity
none), and has an empty input region, so clicks go to the window beneath it.

Sway, KDE and Hyprland offer the layer shell; GNOME doesn't (``offers_layer_shell``). Its interfaces are
declared for pywayland in ``wlr_layer_shell``. The connection is
driven by the caller's event loop: watch ``fileno()`` for reading and call ``read()``.
"""

from __future__ import annotations

import mmap
import os
import weakref
from collections.abc import Iterable

from pywayland.client import Display
from pywayland.protocol.wayland import WlCompositor, WlShm

from sayso.app.platform.wlr_layer_shell import ANCHOR_BOTTOM, KEYBOARD_NONE, OVERLAY_LAYER, ZwlrLayerShellV1

SHM_ARGB8888 = 0  # wl_shm.format
MAX_BUFFERS = 3  # frames the compositor may hold at once; a frame beyond them waits for a release


# The globals a layer surface needs, with the newest version used (wl_surface.damage_buffer: wl_compositor 4).
BOUND = {"wl_compositor": (WlCompositor, 4), "wl_shm": (WlShm, 1), "zwlr_layer_shell_v1": (ZwlrLayerShellV1, 1)}


def offers_layer_shell(interfaces: Iterable[str]) -> bool:
    """Whether a compositor that advertises globals of these interfaces can show a layer surface."""
    return set(BOUND) <= set(interfaces)


def advertised_interfaces() -> set[str]:
    """The globals' interface names of the compositor at $WAYLAND_DISPLAY (none if it can't be reached)."""
    try:
        display = Display()
        display.connect()
    except ValueError:
        return set()
    try:
        names: set[str] = set()
        registry = display.get_registry()
        registry.dispatcher["global"] = lambda _registry, _name, interface, _version: names.add(interface)
        display.roundtrip()
        return names
    finally:
        display.disconnect()


class _Buffer:
    """One frame's pixels in shared memory, busy from its commit until the compositor releases it."""

    def __init__(self, shm, width: int, height: int):
        self.size = (width, height)
        length = width * height * 4
        fd = os.memfd_create("sayso-overlay", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, length)
            self.memory = mmap.mmap(fd, length)
            pool = shm.create_pool(fd, length)
        finally:
            os.close(fd)  # the compositor has its own copy of the descriptor once the request is sent
        self.buffer = pool.create_buffer(0, width, height, width * 4, SHM_ARGB8888)
        pool.destroy()
        self.buffer.dispatcher["release"] = self._released
        self.busy = False
        self.dropped = False

    def _released(self, _buffer) -> None:
        self.busy = False
        if self.dropped:
            self.destroy()

    def destroy(self) -> None:
        self.buffer.destroy()
        self.memory.close()


class LayerSurface:
    """A bottom-centred overlay-layer surface: ``show`` puts a frame on the screen, ``hide`` takes it off.

    Raises ``ValueError`` if the compositor can't be reached or offers no layer shell."""

    def __init__(self, namespace: str, bottom_margin: int):
        self.namespace = namespace
        self.bottom_margin = bottom_margin
        self.display = Display()
        self.display.connect()
        # The connection ends with this object, at the latest as the interpreter exits: its objects first
        # (disconnect destroys them), since one destroyed after its connection would touch freed memory.
        self._disconnect = weakref.finalize(self, self.display.disconnect)
        self._globals: dict[str, object] = {}
        registry = self.display.get_registry()
        registry.dispatcher["global"] = self._on_global
        self.display.roundtrip()
        if not offers_layer_shell(self._globals):
            self._disconnect()
            raise ValueError("the compositor offers no layer shell")
        self._surface = self._layer = None
        self._configured = False
        self._geometry = (0, 0, 1)  # the surface's width and height and its buffers' scale, as last committed
        self._buffers: list[_Buffer] = []
        self._frame: tuple[bytes, int, int, int] | None = None  # the latest frame asked for
        self._shown: tuple[bytes, int, int, int] | None = None  # the frame on the screen

    def _on_global(self, registry, name: int, interface: str, version: int) -> None:
        if interface in BOUND:
            kind, newest = BOUND[interface]
            self._globals[interface] = registry.bind(name, kind, min(version, newest))

    def fileno(self) -> int:
        return self.display.get_fd()

    def read(self) -> None:
        """Reads and handles what the compositor sent; call it when ``fileno()`` is readable. Raises
        ``RuntimeError`` once the connection is lost."""
        self.display.read()
        self.display.dispatch()
        self.display.flush()

    def show(self, pixels: bytes, width: int, height: int, scale: int = 1) -> None:
        """Puts ``width`` x ``height`` ARGB8888 pixels (rows without padding) on the screen, at ``scale``
        buffer pixels per surface pixel. A frame the same as the one shown isn't sent again."""
        if len(pixels) != width * height * 4 or width % scale or height % scale:
            raise ValueError(f"{len(pixels)} bytes for {width} x {height} pixels at scale {scale}")
        self._frame = (bytes(pixels), width, height, scale)
        if self._surface is None:
            self._create(width // scale, height // scale, scale)
        elif self._configured:
            self._draw()
        self.display.flush()

    def hide(self) -> None:
        """Takes the surface off the screen; the next ``show`` makes a new one."""
        if self._layer is not None:
            self._layer.destroy()
            self._surface.destroy()
        self._surface = self._layer = None
        self._configured = False
        self._frame = self._shown = None
        self.display.flush()

    def close(self) -> None:
        self.hide()
        for buffer in self._buffers:
            buffer.destroy()
        self._buffers.clear()
        self._disconnect()

    def _create(self, width: int, height: int, scale: int) -> None:
        """A new surface with the layer-surface role; its first commit carries no buffer, and the
        compositor answers it with a configure, after which frames may be attached."""
        self._surface = self._globals["wl_compositor"].create_surface()
        nothing = self._globals["wl_compositor"].create_region()
        self._surface.set_input_region(nothing)
        nothing.destroy()
        self._layer = self._globals["zwlr_layer_shell_v1"].get_layer_surface(
            self._surface, None, OVERLAY_LAYER, self.namespace)  # no output: the compositor's choice, its focused one
        self._layer.set_size(width, height)
        self._surface.set_buffer_scale(scale)
        self._geometry = (width, height, scale)
        self._layer.set_anchor(ANCHOR_BOTTOM)
        self._layer.set_margin(0, 0, self.bottom_margin, 0)
        self._layer.set_exclusive_zone(0)
        self._layer.set_keyboard_interactivity(KEYBOARD_NONE)
        self._layer.dispatcher["configure"] = self._on_configure
        self._layer.dispatcher["closed"] = self._on_closed
        self._surface.commit()

    def _on_configure(self, layer, serial: int, width: int, height: int) -> None:
        layer.ack_configure(serial)
        self._configured = True
        self._shown = None  # the configure's commit must carry a frame again
        self._draw()

    def _on_closed(self, _layer) -> None:
        """The compositor took the surface away (its output went): the next frame makes a new one."""
        self.hide()

    def _draw(self) -> None:
        if self._frame is None or self._frame == self._shown:
            return
        pixels, width, height, scale = self._frame
        buffer = self._free_buffer(width, height)
        if buffer is None:
            return  # all held by the compositor: the next frame tries again
        buffer.memory[:] = pixels
        buffer.busy = True
        geometry = (width // scale, height // scale, scale)
        if geometry != self._geometry:  # the size is the layer surface's state, asked for with the frame
            self._layer.set_size(*geometry[:2])
            self._surface.set_buffer_scale(scale)
            self._geometry = geometry
        self._surface.attach(buffer.buffer, 0, 0)
        self._surface.damage_buffer(0, 0, width, height)
        self._surface.commit()
        self._shown = self._frame

    def _free_buffer(self, width: int, height: int) -> _Buffer | None:
        """A buffer of this size that the compositor doesn't hold; buffers of another size are dropped."""
        for buffer in list(self._buffers):
            if buffer.size != (width, height):
                self._buffers.remove(buffer)
                buffer.dropped = True
                if not buffer.busy:
                    buffer.destroy()
        free = next((b for b in self._buffers if not b.busy), None)
        if free is None and len(self._buffers) < MAX_BUFFERS:
            free = _Buffer(self._globals["wl_shm"], width, height)
            self._buffers.append(free)
        return free
