"""Sayso's chord names as sway's ``bindsym`` writes them, and finding the chord among sway's config bindings."""

import pytest

from sayso.app.platform.hotkeys import parse_hotkey
from sayso.app.platform.sway_shortcut import config_binding, sway_combo


@pytest.mark.parametrize("hotkey, combo", [
    ("ctrl+space", "Ctrl+space"),
    ("Ctrl + Alt + F9", "Ctrl+Mod1+F9"),
    ("super+shift+enter", "Mod4+Shift+Return"),
    ("ctrl+page_up", "Ctrl+Prior"),
    ("ctrl_r+space", "Ctrl+space"),  # sway's combinations can't tell a modifier's sides apart
    ("alt_r", "Alt_R"),  # a modifier key alone is bound as the key itself
    ("ctrl_l+alt_r", "Alt_R+Control_L"),
    ("super+d", "Mod4+d"),
    ("ctrl+7", "Ctrl+7"),
    ("ctrl+,", "Ctrl+0x2c"),  # a character by its keysym number, which xkb reads as a name
    ("ctrl+é", "Ctrl+0xe9"),
])  # fmt: skip
def test_a_chord_is_written_with_sways_key_names(hotkey, combo):
    assert sway_combo(parse_hotkey(hotkey)) == combo


CONFIG = """\
set $mod Mod4
set $left h
bindsym $mod+Return exec foot
bindsym --no-repeat Control+space exec makoctl dismiss
bindsym $mod+$left focus left
mode "resize" {
    bindsym Alt+F9 resize shrink width 10px
}
"""


@pytest.mark.parametrize("hotkey, line", [
    ("super+enter", "bindsym $mod+Return exec foot"),  # variables are expanded
    ("ctrl+space", "bindsym --no-repeat Control+space exec makoctl dismiss"),  # flags and modifier names
    ("super+h", "bindsym $mod+$left focus left"),
    ("alt+f9", None),  # another mode's binding
    ("ctrl+alt+space", None),
    ("super+f9", None),
])  # fmt: skip
def test_a_chord_that_sways_config_binds_is_found(hotkey, line):
    assert config_binding(CONFIG, parse_hotkey(hotkey)) == line
