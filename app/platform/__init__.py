"""The app's side of the desktop and the hardware: the microphone, shortcuts, delivery of text,
notifications, sounds and icons, autostart, the single-instance socket and the XDG folders. Imports
nothing of ``core`` or ``ui``."""
