"""Icons, sounds and the voice activity model: package data of ``sayso``."""
