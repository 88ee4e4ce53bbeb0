"""A checkpoint's JSON files (configs, tokenizers), read with one error for a missing or broken one."""

from __future__ import annotations

import json
from pathlib import Path

from sayso.engine.errors import ModelFileError


def load_json(path: Path) -> dict:
    """A checkpoint's JSON file; a ModelFileError naming it when it is missing or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelFileError(path, f"can't be read as JSON ({e})") from None
