"""Sayso: local push-to-talk dictation and file transcription on the GPU.

The repository keeps its parts in top-level folders, and they make this one package: ``app/`` is
``sayso.app`` (the Qt GUI and the command line), ``engine/`` is ``sayso.engine`` (speech recognition, no
Qt), ``shaders/`` is ``sayso.shaders`` (the WGSL kernels) and ``resources/`` is ``sayso.resources``
(icons, sounds, the voice activity model), so an installed Sayso has one top-level name and reads its
data files through ``importlib.resources``. In a checkout, ``sayso/app`` and the others are symbolic
links to those folders, so ``python -m sayso`` runs there without an install and tools that read the
source resolve every ``sayso.`` import; the build maps the folders themselves (``setup.py``), so a wheel
holds the files.
"""
