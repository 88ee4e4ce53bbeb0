"""The app's state and work without widgets: settings, history, the engine's thread and its jobs.
Imports ``platform`` and ``engine``, never ``ui``."""
