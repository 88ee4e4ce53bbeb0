"""wlroots' data-control protocol (zwlr_data_control_manager_v1, version 2) declared for pywayland, which
ships only its standard successor, ext_data_control_v1: the same messages under other names.

libwayland tells a message by its position in its interface (the opcode), so each interface's requests
and events are declared here in the protocol's order. Events are declared by their signatures alone:
pywayland hands them to the handlers set on a proxy's ``dispatcher``.
"""

from __future__ import annotations

from pywayland.protocol.wayland import WlSeat, WlSeatProxy
from pywayland.protocol_core import Argument, ArgumentType, Interface, Proxy


class ZwlrDataControlManagerV1(Interface):
    name = "zwlr_data_control_manager_v1"
    version = 2


class ZwlrDataControlDeviceV1(Interface):
    name = "zwlr_data_control_device_v1"
    version = 2


class ZwlrDataControlSourceV1(Interface):
    name = "zwlr_data_control_source_v1"
    version = 1


class ZwlrDataControlOfferV1(Interface):
    name = "zwlr_data_control_offer_v1"
    version = 1


class ZwlrDataControlManagerV1Proxy(Proxy[ZwlrDataControlManagerV1]):
    interface = ZwlrDataControlManagerV1

    @ZwlrDataControlManagerV1.request(Argument(ArgumentType.NewId, interface=ZwlrDataControlSourceV1))
    def create_data_source(self) -> ZwlrDataControlSourceV1Proxy:
        return self._marshal_constructor(0, ZwlrDataControlSourceV1)

    @ZwlrDataControlManagerV1.request(
        Argument(ArgumentType.NewId, interface=ZwlrDataControlDeviceV1),
        Argument(ArgumentType.Object, interface=WlSeat),
    )
    def get_data_device(self, seat: WlSeatProxy) -> ZwlrDataControlDeviceV1Proxy:
        return self._marshal_constructor(1, ZwlrDataControlDeviceV1, seat)

    @ZwlrDataControlManagerV1.request()
    def destroy(self) -> None:
        self._marshal(2)
        self._destroy()


class ZwlrDataControlDeviceV1Proxy(Proxy[ZwlrDataControlDeviceV1]):
    interface = ZwlrDataControlDeviceV1

    @ZwlrDataControlDeviceV1.request(Argument(ArgumentType.Object, interface=ZwlrDataControlSourceV1, nullable=True))
    def set_selection(self, source: ZwlrDataControlSourceV1Proxy | None) -> None:
        self._marshal(0, source)

    @ZwlrDataControlDeviceV1.request()
    def destroy(self) -> None:
        self._marshal(1)
        self._destroy()

    @ZwlrDataControlDeviceV1.request(
        Argument(ArgumentType.Object, interface=ZwlrDataControlSourceV1, nullable=True), version=2
    )
    def set_primary_selection(self, source: ZwlrDataControlSourceV1Proxy | None) -> None:
        self._marshal(2, source)


class ZwlrDataControlSourceV1Proxy(Proxy[ZwlrDataControlSourceV1]):
    interface = ZwlrDataControlSourceV1

    @ZwlrDataControlSourceV1.request(Argument(ArgumentType.String))
    def offer(self, mime_type: str) -> None:
        self._marshal(0, mime_type)

    @ZwlrDataControlSourceV1.request()
    def destroy(self) -> None:
        self._marshal(1)
        self._destroy()


class ZwlrDataControlOfferV1Proxy(Proxy[ZwlrDataControlOfferV1]):
    interface = ZwlrDataControlOfferV1

    @ZwlrDataControlOfferV1.request(Argument(ArgumentType.String), Argument(ArgumentType.FileDescriptor))
    def receive(self, mime_type: str, fd: int) -> None:
        self._marshal(0, mime_type, fd)

    @ZwlrDataControlOfferV1.request()
    def destroy(self) -> None:
        self._marshal(1)
        self._destroy()


class _DeviceEvents:
    @ZwlrDataControlDeviceV1.event(Argument(ArgumentType.NewId, interface=ZwlrDataControlOfferV1))
    def data_offer(self, id: ZwlrDataControlOfferV1Proxy) -> None: ...

    @ZwlrDataControlDeviceV1.event(Argument(ArgumentType.Object, interface=ZwlrDataControlOfferV1, nullable=True))
    def selection(self, id: ZwlrDataControlOfferV1Proxy | None) -> None: ...

    @ZwlrDataControlDeviceV1.event()
    def finished(self) -> None: ...

    @ZwlrDataControlDeviceV1.event(
        Argument(ArgumentType.Object, interface=ZwlrDataControlOfferV1, nullable=True), version=2
    )
    def primary_selection(self, id: ZwlrDataControlOfferV1Proxy | None) -> None: ...


class _SourceEvents:
    @ZwlrDataControlSourceV1.event(Argument(ArgumentType.String), Argument(ArgumentType.FileDescriptor))
    def send(self, mime_type: str, fd: int) -> None: ...

    @ZwlrDataControlSourceV1.event()
    def cancelled(self) -> None: ...


class _OfferEvents:
    @ZwlrDataControlOfferV1.event(Argument(ArgumentType.String))
    def offer(self, mime_type: str) -> None: ...


for _interface, _proxy in (
    (ZwlrDataControlManagerV1, ZwlrDataControlManagerV1Proxy),
    (ZwlrDataControlDeviceV1, ZwlrDataControlDeviceV1Proxy),
    (ZwlrDataControlSourceV1, ZwlrDataControlSourceV1Proxy),
    (ZwlrDataControlOfferV1, ZwlrDataControlOfferV1Proxy),
):
    _interface._gen_c()
    _interface.proxy_class = _proxy
