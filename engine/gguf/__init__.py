"""GGUF model files in transcribe.cpp's layout: ``ModelFile`` reads them, ``write_gguf`` writes them."""

from engine.gguf.reader import ModelFile
from engine.gguf.writer import Meta, TensorOut, write_gguf

__all__ = ["Meta", "ModelFile", "TensorOut", "write_gguf"]
