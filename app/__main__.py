"""``python -m app``: the desktop app, as ``sayso`` without a subcommand."""

import sys

from app.main import run_app

sys.exit(run_app(sys.argv[1:]))
