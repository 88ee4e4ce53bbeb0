"""The Wayland clipboard in all its types, through the data-control protocol: a client without focus reads
every type of the selection and sets a selection of several types, which wl-copy can't (it offers one).

The compositor's ext_data_control_v1 is used where it offers it, else wlroots' zwlr_data_control_v1 (sway,
KDE); a compositor with neither (GNOME) gives ``DataControlUnavailable`` and the caller goes without.

One connection to the compositor, on a thread of its own: it reads the selection through pipes, serves
the selections Sayso sets (another client asks for a type, the bytes go to the file descriptor it sent)
and runs until ``close`` or the process's end: a selection set here lives only as long as its connection
(when Sayso quits, ``clipboard_keeper`` takes the user's contents over). Each call returns a
``concurrent.futures.Future``; its callbacks run on that thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

Contents = dict[str, bytes]
"""A clipboard's content: each MIME type's bytes, in the order its owner offered them."""

READ_TIMEOUT_S = 1.0
"""The time the selection's owner gets to hand over every type: past it the clipboard can't be read."""
READ_LIMIT_BYTES = 64 * 2**20
"""All types together at most this large (a 4K screenshot as PNG and BMP fits): a bigger clipboard can't be
read, so it is left alone rather than held here in part."""
SEND_STALL_S = 5.0  # a client that takes no bytes for this long has stopped reading: its transfer ends
TEXT_TYPES = ("text/plain;charset=utf-8", "text/plain", "UTF8_STRING", "TEXT", "STRING")
"""The types text is offered in: the MIME ones and the X11 names that Xwayland and older clients ask for."""


class DataControlUnavailable(Exception):
    """No compositor to reach, or one without a data-control protocol (``lasting``: asking again won't help)."""

    def __init__(self, reason: str, lasting: bool = False):
        super().__init__(reason)
        self.lasting = lasting


class ClipboardUnreadable(Exception):
    """The selection's owner didn't hand over every type in time, or they are past ``READ_LIMIT_BYTES``."""


def text_contents(text: str) -> Contents:
    data = text.encode()
    return dict.fromkeys(TEXT_TYPES, data)


class Selection:
    """Contents set as the clipboard from here; ``replaced`` is set once it is the clipboard no more:
    another selection took its place, or the connection ended."""

    def __init__(self, contents: Contents):
        self.contents = contents
        self.replaced = threading.Event()


class DataControlClipboard:
    """The compositor's clipboard through data control; the connection starts with the first call."""

    def __init__(self, display: str | None = None):
        self._display = display  # None: $WAYLAND_DISPLAY
        self._lock = threading.Lock()
        self._tasks: list[tuple[Callable[[_Connection, Future], None], Future]] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._unavailable: DataControlUnavailable | None = None  # a lasting answer: the compositor has none
        self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def read(self, timeout: float = READ_TIMEOUT_S) -> Future:
        """The selection's ``Contents`` (empty when nothing is copied), or ``ClipboardUnreadable``."""
        return self._call(lambda connection, future: connection.read(timeout, future))

    def put(self, contents: Contents, over: Selection | None = None) -> Future:
        """Set ``contents`` as the clipboard (empty: clear it); the result, once the compositor has taken
        it, is its ``Selection``. With ``over``, only while that selection is still the clipboard (else
        the result is None): what another client copied since then stays."""
        return self._call(lambda connection, future: connection.put(contents, over, future))

    def held(self) -> Future:
        """The ``Selection`` set from here that is the clipboard now, as the compositor has it; None when
        another client's selection is, or none."""
        return self._call(lambda connection, future: connection.held(future))

    def close(self) -> None:
        """End the connection: the selections set from here are gone."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            self._wake()
            thread.join(timeout=5)
            self._stop.clear()

    def _call(self, task: Callable[[_Connection, Future], None]) -> Future:
        future: Future = Future()
        with self._lock:
            if self._unavailable is not None:
                future.set_exception(self._unavailable)
                return future
            self._tasks.append((task, future))
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="wayland-data-control", daemon=True)
                self._thread.start()
        self._wake()
        return future

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError):  # full: the thread has wake-ups enough to read
            os.write(self._wake_write, b"\0")

    def _serve(self) -> None:
        connection = None
        try:
            connection = _Connection(self._display)
            while not self._stop.is_set():
                while (call := self._next_call()) is not None:
                    task, future = call
                    try:
                        task(connection, future)
                    except (OSError, RuntimeError) as failure:
                        future.set_exception(DataControlUnavailable(str(failure)))
                        raise
                connection.wait(self._wake_read)
            error = DataControlUnavailable("the connection was closed")
        except DataControlUnavailable as unavailable:
            if unavailable.lasting:
                self._unavailable = unavailable
            error = unavailable
        except (OSError, RuntimeError) as failure:  # pywayland's error: the compositor is gone
            log.info("data control: the connection to the compositor ended (%s)", failure)
            error = DataControlUnavailable(str(failure))
        if connection is not None:
            connection.close()
        with self._lock:
            tasks, self._tasks = self._tasks, []
            if self._thread is threading.current_thread():
                self._thread = None  # the next call connects again
        for _, future in tasks:
            future.set_exception(error)

    def _next_call(self) -> tuple[Callable[[_Connection, Future], None], Future] | None:
        with self._lock:
            return self._tasks.pop(0) if self._tasks else None


@dataclass
class _Reading:
    """One type of the selection arriving through a pipe."""

    fd: int
    chunks: list[bytes] = field(default_factory=list)
    ended: bool = False


@dataclass
class _Read:
    """A read of the whole selection: every type's pipe, until all have ended or the deadline."""

    types: list[str]
    readings: list[_Reading]
    deadline: float
    future: Future
    size: int = 0


@dataclass
class _Sending:
    """A type's bytes on their way to the client that asked for them."""

    fd: int
    data: memoryview
    stall_deadline: float


class _Connection:
    """The connection, used on its thread alone: every request, event and pipe of data control."""

    def __init__(self, name: str | None):
        from pywayland.client import Display

        self.offers: list = []  # introduced by data_offer, not yet the selection: their types are arriving
        self.selection = None  # the selection's offer (its types in user_data), None when nothing is copied
        self.sources: dict = {}  # the sources set from here that are still the clipboard -> their Selection
        self.reads: list[_Read] = []
        self.sendings: list[_Sending] = []
        self.finished = False
        self.display = Display(name)
        try:
            self.display.connect()
        except ValueError as error:
            raise DataControlUnavailable(f"no Wayland compositor to connect to ({error})") from error
        try:
            self.protocol = self._bind()
        except BaseException:
            self.display.disconnect()
            raise
        log.info("data control: %s on %s", self.protocol, name or os.environ.get("WAYLAND_DISPLAY", "wayland-0"))

    def _bind(self) -> str:
        """Bind the seat and the data-control manager, make the seat's data device and take its first
        selection; the manager's name."""
        from pywayland.protocol.ext_data_control_v1 import ExtDataControlManagerV1
        from pywayland.protocol.wayland import WlSeat

        from sayso.app.platform.wlr_data_control import ZwlrDataControlManagerV1

        found: dict[str, int] = {}
        self.registry = self.display.get_registry()  # kept: pywayland finds the connection through it
        self.registry.dispatcher["global"] = lambda _, name, interface, version: found.setdefault(interface, name)
        self.roundtrip()
        manager = next((m for m in (ExtDataControlManagerV1, ZwlrDataControlManagerV1) if m.name in found), None)
        if manager is None or WlSeat.name not in found:
            raise DataControlUnavailable("the compositor offers no data-control protocol", lasting=True)
        # Version 1: the clipboard alone; the primary selection (version 2 of the wlroots protocol) is not
        # Sayso's to touch. The first seat is the user's: a desktop has one.
        self.seat = self.registry.bind(found[WlSeat.name], WlSeat, 1)
        self.manager = self.registry.bind(found[manager.name], manager, 1)
        self.device = self.manager.get_data_device(self.seat)
        self.device.dispatcher["data_offer"] = self._on_data_offer
        self.device.dispatcher["selection"] = self._on_selection
        self.device.dispatcher["finished"] = self._on_finished
        self.roundtrip()  # the compositor sends the selection as the device is made
        return manager.name

    # ---- events --------------------------------------------------------------------------------------

    def _on_data_offer(self, _, offer) -> None:
        if offer._display is not self.display:
            # pywayland gives a new object to the first connection it knows of, maybe another of this
            # process's: moved to this one, which destroys it before it disconnects.
            offer._display._children.discard(offer)
            offer._display = self.display
            self.display._children.add(offer)
        offer.user_data = []
        offer.dispatcher["offer"] = lambda offer, mime_type: offer.user_data.append(mime_type)
        self.offers.append(offer)

    def _on_selection(self, _, offer) -> None:
        """The previous offer and those never made the selection are destroyed, as the protocol asks;
        reads already asked of them go on (the owner has their pipes)."""
        for old in [*self.offers, self.selection]:
            if old is not None and old is not offer:
                old.destroy()
        self.offers.clear()
        self.selection = offer

    def _on_finished(self, _) -> None:
        self.finished = True  # raised from wait(): pywayland prints what a handler raises and goes on

    def _on_send(self, source, mime_type: str, fd: int) -> None:
        data = self.sources[source].contents.get(mime_type, b"") if source in self.sources else b""
        os.set_blocking(fd, False)
        self.sendings.append(_Sending(fd, memoryview(data), time.monotonic() + SEND_STALL_S))

    def _on_cancelled(self, source) -> None:
        self.sources.pop(source).replaced.set()
        source.destroy()

    # ---- requests ------------------------------------------------------------------------------------

    def read(self, timeout: float, future: Future) -> None:
        self.roundtrip()  # the selection as it is now, should another client have just set it
        types = list(dict.fromkeys(self.selection.user_data)) if self.selection is not None else []
        if not types:
            future.set_result({})
            return
        readings = []
        for mime_type in types:
            read_end, write_end = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            self.selection.receive(mime_type, write_end)  # libwayland sends a copy of write_end
            os.close(write_end)
            readings.append(_Reading(read_end))
        self.reads.append(_Read(types, readings, time.monotonic() + timeout, future))

    def put(self, contents: Contents, over: Selection | None, future: Future) -> None:
        if over is not None:
            self.roundtrip()  # a `cancelled` of ``over`` on its way has arrived after this
            if over.replaced.is_set():
                future.set_result(None)
                return
        selection = Selection(contents)
        source = None
        if contents:
            source = self.manager.create_data_source()
            for mime_type in contents:
                source.offer(mime_type)
            source.dispatcher["send"] = self._on_send
            source.dispatcher["cancelled"] = self._on_cancelled
            self.sources[source] = selection
        self.device.set_selection(source)
        self.roundtrip()  # set once the compositor has it: a paste key pressed next finds it
        future.set_result(selection)

    def held(self, future: Future) -> None:
        self.roundtrip()  # a `cancelled` on its way has arrived after this
        future.set_result(next(iter(self.sources.values()), None))

    def roundtrip(self) -> None:
        if self.display.roundtrip() < 0:
            raise ConnectionError("the compositor closed the connection")

    # ---- the loop ------------------------------------------------------------------------------------

    def wait(self, wake_fd: int) -> None:
        """Wait for the compositor, a pipe, a deadline or ``wake_fd`` (a call), and handle what came."""
        self.display.dispatch()  # events already queued
        display_fd = self.display.get_fd()
        poller = select.poll()
        poller.register(display_fd, select.POLLIN | (select.POLLOUT if self.display.flush() < 0 else 0))
        poller.register(wake_fd, select.POLLIN)
        readings = {r.fd: (read, r) for read in self.reads for r in read.readings if not r.ended}
        sendings = {s.fd: s for s in self.sendings}
        for fd in readings:
            poller.register(fd, select.POLLIN)
        for fd in sendings:
            poller.register(fd, select.POLLOUT)
        deadlines = [read.deadline for read in self.reads] + [s.stall_deadline for s in self.sendings]
        timeout_ms = max(0, (min(deadlines) - time.monotonic()) * 1000) if deadlines else None
        for fd, events in poller.poll(timeout_ms):
            if fd == display_fd:
                if events & (select.POLLERR | select.POLLHUP):
                    raise ConnectionError("the compositor closed the connection")
                if events & select.POLLIN:
                    self.display.dispatch(block=True)
            elif fd == wake_fd:
                while _drain(wake_fd):
                    pass
            elif fd in readings:
                self._receive(*readings[fd])
            elif fd in sendings:
                self._send(sendings[fd])
        self._end_overdue()
        if self.finished:
            raise ConnectionError("the compositor ended data control (the seat is gone)")

    def _receive(self, read: _Read, reading: _Reading) -> None:
        if read not in self.reads:
            return  # ended by another of its pipes in the same wait: this one is closed
        chunk = _drain(reading.fd)
        if chunk is None:
            return
        if not chunk:
            reading.ended = True
            os.close(reading.fd)
        else:
            reading.chunks.append(chunk)
            read.size += len(chunk)
        if read.size > READ_LIMIT_BYTES:
            self._end_read(read, ClipboardUnreadable(f"the clipboard holds more than {READ_LIMIT_BYTES} bytes"))
        elif all(r.ended for r in read.readings):
            self._end_read(read, None)

    def _send(self, sending: _Sending) -> None:
        try:
            written = os.write(sending.fd, sending.data) if sending.data else 0
        except BlockingIOError:
            return
        except OSError:  # the client stopped reading (closed its end)
            written, sending.data = 0, memoryview(b"")
        sending.data = sending.data[written:]
        sending.stall_deadline = time.monotonic() + SEND_STALL_S
        if not sending.data:
            os.close(sending.fd)
            self.sendings.remove(sending)

    def _end_overdue(self) -> None:
        now = time.monotonic()
        for read in [r for r in self.reads if r.deadline <= now]:
            self._end_read(read, ClipboardUnreadable("the clipboard's owner doesn't hand over its content"))
        for sending in [s for s in self.sendings if s.stall_deadline <= now]:
            os.close(sending.fd)
            self.sendings.remove(sending)

    def _end_read(self, read: _Read, error: ClipboardUnreadable | None) -> None:
        self.reads.remove(read)
        for reading in read.readings:
            if not reading.ended:
                os.close(reading.fd)
        if error is not None:
            read.future.set_exception(error)
        else:
            read.future.set_result({t: b"".join(r.chunks) for t, r in zip(read.types, read.readings)})

    def close(self) -> None:
        for read in list(self.reads):
            self._end_read(read, ClipboardUnreadable("the connection was closed"))
        for sending in self.sendings:
            os.close(sending.fd)
        for selection in self.sources.values():
            selection.replaced.set()
        self.display.disconnect()


def offered(display: str | None = None) -> str:
    """The compositor's data-control protocol, as a connection finds it: the name of its manager, else
    ``DataControlUnavailable``."""
    connection = _Connection(display)
    connection.close()
    return connection.protocol


def _drain(fd: int) -> bytes | None:
    """What ``fd`` has now (b"": its end), None when nothing yet."""
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return None
