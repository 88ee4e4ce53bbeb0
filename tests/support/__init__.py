"""What the tests share besides fixtures (those stay in ``conftest.py``, where pytest finds them): the test
data and its marks (``data``), transcripts compared word for word (``texts``), transcribe.cpp's results
(``reference``), the GPU's session (``gpu``), Qt signal waits (``qt``), the environment of a ``sayso``
command (``cli``), the shaders' declarations read from WGSL (``wgsl``) and the Conformer families'
random-weight models (a fixture factory each test module calls) and comparisons (``conformer``).

``tests/`` is on ``sys.path`` (pyproject's pytest ``pythonpath``), so a test module imports these as
``from support.data import AUDIO``, as it imports the desktop doubles from ``e2e``.
"""
