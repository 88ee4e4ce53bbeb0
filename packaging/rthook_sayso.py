"""PyInstaller runtime hook: the frozen engine reads its WGSL from the bundle's shaders/ folder."""

import os
import sys

os.environ.setdefault("SAYSO_SHADERS", os.path.join(sys._MEIPASS, "shaders"))
