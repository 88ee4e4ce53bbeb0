"""What the Conformer model families (``engine/parakeet``, ``engine/gigaam``) share.

* ``weights``: loading linear, norm and conv tensors from a GGUF file onto a backend;
* ``subsampling``: the strided convolutions from 10 ms mel frames to encoder frames;
* ``attention``: relative-position (Parakeet) and rotary (GigaAM) self-attention;
* ``block``: the Conformer block (half FFN, attention, conv module, half FFN, LayerNorm);
* ``heads``: TDT, RNN-T and CTC heads with their greedy searches (numpy, on the CPU);
* ``text``: vocabularies and the tokens-to-segments step;
* ``model``: ``encode`` and ``decode`` over the loaded subsampling, blocks and head.
"""
