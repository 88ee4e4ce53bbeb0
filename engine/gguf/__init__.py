"""GGUF model files in transcribe.cpp's layout: ``reader.ModelFile`` reads them, ``writer.write_gguf``
writes them. Nothing is imported here: the engine reads files at every start, and only the converter
writes them (with the ``gguf`` package, which the reader does without)."""
