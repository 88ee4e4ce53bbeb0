"""The Qt widgets and the coordinator that wires them to ``core`` and ``platform``. Nothing below
imports it."""
