"""A stand-in for a GTK 3 editor (Mousepad, gedit): a GTK 3 window with one text view, run as its own
process on Wayland, by the distribution's Python (its python3-gi), not the project's.

    python3 gtk_target_window.py TITLE

Prints the same JSON lines as target_window.py: {"ready": true} once the window is shown,
{"t": <time.time()>, "text": "..."} whenever the text changes and {"t": ..., "key": "<Control>v"} for
every key press the text view receives. Reads commands on stdin, one per line: ``quit``.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ["GDK_BACKEND"] = "wayland"  # before Gtk's import, which opens the display

import gi  # noqa: E402

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402


def emit(payload: dict) -> None:
    print(json.dumps(payload), flush=True)


def main() -> int:
    window = Gtk.Window(title=sys.argv[1])
    window.set_default_size(640, 240)
    view = Gtk.TextView()
    window.add(view)
    text = view.get_buffer()
    text.connect("changed", lambda _: emit({"t": time.time(),
                                            "text": text.get_text(text.get_start_iter(), text.get_end_iter(), True)}))

    def key_pressed(_, event) -> bool:
        emit({"t": time.time(), "key": Gtk.accelerator_name(event.keyval, event.state)})
        return False  # the text view has it too

    view.connect("key-press-event", key_pressed)

    def command(source, _) -> bool:
        line = source.readline()
        if line.strip() in ("quit", ""):
            Gtk.main_quit()
            return False
        return True

    GLib.io_add_watch(sys.stdin, GLib.PRIORITY_DEFAULT, GLib.IO_IN | GLib.IO_HUP, command)
    window.connect("destroy", lambda _: Gtk.main_quit())
    window.show_all()
    emit({"ready": True})
    Gtk.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
