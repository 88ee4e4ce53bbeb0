"""Sayso's engine: models, backends and audio, with no Qt.

ONNX Runtime (the Moonshine converter reads the ORT files of Moonshine's packages with it) ships
Microsoft's telemetry client on Linux too: on import it writes a device id under ~/.cache/Microsoft
and a session file in the temp folder, and soon after it looks up mobile.events.data.microsoft.com
to send events. What people dictate stays on their computer, and so does the fact that they use
Sayso: its own switch turns it off, set here because this package is imported before anything that
imports onnxruntime.
"""

import os

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
