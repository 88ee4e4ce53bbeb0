"""wlroots' layer-shell protocol (wlr-layer-shell-unstable-v1, version 1) declared for pywayland, which
ships none of it: the two interfaces the overlay's surface needs (``app.platform.layer_shell``).

libwayland tells a message by its position in its interface (the opcode), so each interface's requests
and events are declared here in the protocol's order. Events are declared by their signatures alone:
pywayland hands them to the handlers set on a proxy's ``dispatcher``.
"""

from __future__ import annotations

from pywayland.protocol.wayland import WlOutput, WlOutputProxy, WlSurface, WlSurfaceProxy
from pywayland.protocol.xdg_shell import XdgPopup, XdgPopupProxy
from pywayland.protocol_core import Argument, ArgumentType, Interface, Proxy

OVERLAY_LAYER = 3  # zwlr_layer_shell_v1.layer: above fullscreen windows
ANCHOR_BOTTOM = 2  # zwlr_layer_surface_v1.anchor; anchored to one edge only, a surface is centred along it
KEYBOARD_NONE = 0  # zwlr_layer_surface_v1.keyboard_interactivity: never the keyboard focus


class ZwlrLayerShellV1(Interface):
    name = "zwlr_layer_shell_v1"
    version = 1


class ZwlrLayerSurfaceV1(Interface):
    name = "zwlr_layer_surface_v1"
    version = 1


class ZwlrLayerShellV1Proxy(Proxy[ZwlrLayerShellV1]):
    interface = ZwlrLayerShellV1

    @ZwlrLayerShellV1.request(
        Argument(ArgumentType.NewId, interface=ZwlrLayerSurfaceV1),
        Argument(ArgumentType.Object, interface=WlSurface),
        Argument(ArgumentType.Object, interface=WlOutput, nullable=True),
        Argument(ArgumentType.Uint),
        Argument(ArgumentType.String),
    )
    def get_layer_surface(self, surface: WlSurfaceProxy, output: WlOutputProxy | None, layer: int,
                          namespace: str) -> ZwlrLayerSurfaceV1Proxy:  # fmt: skip
        return self._marshal_constructor(0, ZwlrLayerSurfaceV1, surface, output, layer, namespace)


class ZwlrLayerSurfaceV1Proxy(Proxy[ZwlrLayerSurfaceV1]):
    interface = ZwlrLayerSurfaceV1

    @ZwlrLayerSurfaceV1.request(Argument(ArgumentType.Uint), Argument(ArgumentType.Uint))
    def set_size(self, width: int, height: int) -> None:
        self._marshal(0, width, height)

    @ZwlrLayerSurfaceV1.request(Argument(ArgumentType.Uint))
    def set_anchor(self, anchor: int) -> None:
        self._marshal(1, anchor)

    @ZwlrLayerSurfaceV1.request(Argument(ArgumentType.Int))
    def set_exclusive_zone(self, zone: int) -> None:
        self._marshal(2, zone)

    @ZwlrLayerSurfaceV1.request(*(Argument(ArgumentType.Int),) * 4)
    def set_margin(self, top: int, right: int, bottom: int, left: int) -> None:
        self._marshal(3, top, right, bottom, left)

    @ZwlrLayerSurfaceV1.request(Argument(ArgumentType.Uint))
    def set_keyboard_interactivity(self, keyboard_interactivity: int) -> None:
        self._marshal(4, keyboard_interactivity)

    @ZwlrLayerSurfaceV1.request(Argument(ArgumentType.Object, interface=XdgPopup))
    def get_popup(self, popup: XdgPopupProxy) -> None:
        self._marshal(5, popup)

    @ZwlrLayerSurfaceV1.request(Argument(ArgumentType.Uint))
    def ack_configure(self, serial: int) -> None:
        self._marshal(6, serial)

    @ZwlrLayerSurfaceV1.request()
    def destroy(self) -> None:
        self._marshal(7)
        self._destroy()


class _LayerSurfaceEvents:
    @ZwlrLayerSurfaceV1.event(Argument(ArgumentType.Uint), Argument(ArgumentType.Uint), Argument(ArgumentType.Uint))
    def configure(self, serial: int, width: int, height: int) -> None: ...

    @ZwlrLayerSurfaceV1.event()
    def closed(self) -> None: ...


for _interface, _proxy in ((ZwlrLayerShellV1, ZwlrLayerShellV1Proxy), (ZwlrLayerSurfaceV1, ZwlrLayerSurfaceV1Proxy)):
    _interface._gen_c()
    _interface.proxy_class = _proxy
