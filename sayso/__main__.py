"""``python -m sayso``: the ``sayso`` command."""

import sys

from sayso.app.cli import main

sys.exit(main())
