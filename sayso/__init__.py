"""Sayso: local push-to-talk dictation and file transcription on the GPU.

The repository keeps its parts in top-level folders, and the build maps them into this one package
(``setup.py``): ``app/`` is ``sayso.app`` (the Qt GUI and the command line), ``engine/`` is
``sayso.engine`` (speech recognition, no Qt), ``shaders/`` is ``sayso.shaders`` (the WGSL kernels) and
``resources/`` is ``sayso.resources`` (icons, sounds, the voice activity model), so an installed Sayso
has one top-level name and reads its data files through ``importlib.resources``.
"""
