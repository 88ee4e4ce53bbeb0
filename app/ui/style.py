"""The look: Fusion with a light palette and one style sheet, so Sayso looks the same on every desktop.

Colors are named once here (``COLORS``) and used by the style sheet and by the widgets that paint
themselves (record button, level bars, overlay).
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QPalette
from PySide6.QtWidgets import QApplication

from sayso.app.platform.assets import resource

COLORS = {
    "bg": "#F6F7FB",
    "card": "#FFFFFF",
    "border": "#E5E7EB",
    "border_strong": "#D1D5DB",
    "text": "#111827",
    "muted": "#6B7280",
    "faint": "#9CA3AF",
    "accent": "#6366F1",
    "accent_dark": "#4F46E5",
    "accent_soft": "#EEF2FF",
    "accent_text": "#4338CA",
    "recording": "#EF4444",
    "recording_soft": "#FEE2E2",
    "working": "#F59E0B",
    "ok": "#10B981",
    "warn_bg": "#FFFBEB",
    "warn_border": "#FDE68A",
    "warn_text": "#92400E",
    "error": "#DC2626",
    "overlay": "#111827",
}

STYLE_SHEET = """
QWidget { color: %(text)s; }
QMainWindow, QWidget#Content, QScrollArea#Page, QWidget#PageBody { background: %(bg)s; }
QWidget#Sidebar { background: %(card)s; border-right: 1px solid %(border)s; }
QLabel#Brand { font-size: 15pt; font-weight: 600; }
QListWidget#Nav { background: transparent; border: none; outline: 0; }
QListWidget#Nav::item { padding-left: 8px; border-radius: 8px; margin: 1px 10px; color: #374151; }
QListWidget#Nav::item:selected { background: %(accent_soft)s; color: %(accent_text)s; }
QListWidget#Nav::item:hover:!selected { background: #F3F4F6; }
QFrame#Card { background: %(card)s; border: 1px solid %(border)s; border-radius: 12px; }
QFrame#DropZone { background: %(card)s; border: 2px dashed %(border_strong)s; border-radius: 12px; }
QFrame#DropZone[hover="true"] { background: %(accent_soft)s; border-color: %(accent)s; }
QFrame#Notice { background: %(warn_bg)s; border: 1px solid %(warn_border)s; border-radius: 8px; }
QLabel#Notice { color: %(warn_text)s; }
QLabel#PageTitle { font-size: 17pt; font-weight: 600; }
QLabel#CardTitle { font-size: 11pt; font-weight: 600; }
QLabel#StateTitle { font-size: 15pt; font-weight: 600; }
QLabel#Muted { color: %(muted)s; }
QLabel#Faint { color: %(faint)s; }
QLabel#Error { color: %(error)s; }
QLabel#Badge {
    background: %(accent_soft)s; color: %(accent_text)s; border-radius: 8px; padding: 1px 8px; font-size: 9pt;
    font-weight: 600;
}
QFrame#Rule { background: %(border)s; border: none; }
QPushButton, QToolButton#Flat {
    background: %(card)s; border: 1px solid %(border_strong)s; border-radius: 8px; padding: 6px 14px;
}
QPushButton:hover { background: #F9FAFB; border-color: %(faint)s; }
QPushButton:pressed { background: #F3F4F6; }
QPushButton:disabled { color: %(faint)s; border-color: %(border)s; }
QPushButton#Primary { background: %(accent)s; color: white; border: 1px solid %(accent)s; }
QPushButton#Primary:hover { background: %(accent_dark)s; border-color: %(accent_dark)s; }
QPushButton#Primary:disabled { background: #C7D2FE; border-color: #C7D2FE; }
QPushButton#Chip { padding: 4px 10px; border-radius: 14px; font-weight: 600; }
QToolButton#Icon { background: transparent; border: none; border-radius: 6px; padding: 4px; }
QToolButton#Icon:hover { background: #F3F4F6; }
QLineEdit, QPlainTextEdit, QTextBrowser, QComboBox, QKeySequenceEdit, QListWidget#List {
    background: %(card)s; border: 1px solid %(border_strong)s; border-radius: 8px;
    selection-background-color: #C7D2FE; selection-color: %(text)s;
}
QLineEdit, QComboBox { padding: 5px 8px; min-height: 20px; }
QPlainTextEdit, QTextBrowser { padding: 4px; }
QLineEdit:focus, QPlainTextEdit:focus, QComboBox:focus, QKeySequenceEdit:focus { border-color: %(accent)s; }
QComboBox::drop-down { border: none; width: 26px; }
QComboBox::down-arrow { image: url(%(combo_arrow)s); width: 12px; height: 12px; }
QComboBox QAbstractItemView { background: %(card)s; border: 1px solid %(border)s; selection-background-color: %(accent_soft)s; selection-color: %(text)s; }
QListWidget#List { padding: 4px; outline: 0; }
QListWidget#List::item { border-radius: 8px; padding: 0; }  /* a row's widget is as tall as its size hint */
QListWidget#List::item:selected { background: %(accent_soft)s; }
QListWidget#List::item:hover:!selected { background: #F9FAFB; }
QProgressBar { background: %(accent_soft)s; border: none; border-radius: 3px; max-height: 6px; min-height: 6px; }
QProgressBar::chunk { background: %(accent)s; border-radius: 3px; }
QCheckBox { spacing: 8px; }
QScrollBar:vertical { background: transparent; width: 10px; margin: 2px; }
QScrollBar::handle:vertical { background: #D1D5DB; border-radius: 3px; min-height: 24px; }
QScrollBar::add-line, QScrollBar::sub-line { height: 0; width: 0; }
QScrollBar::add-page, QScrollBar::sub-page { background: transparent; }
QSplitter::handle { background: transparent; }
QStatusBar { background: %(card)s; border-top: 1px solid %(border)s; color: %(muted)s; }
QToolTip { background: %(overlay)s; color: white; border: none; padding: 4px 8px; border-radius: 6px; }
"""


def apply(app: QApplication) -> None:
    """Fusion, a light palette that matches the style sheet, and a slightly larger base font."""
    app.setStyle("Fusion")
    palette = QPalette()
    palette.setColor(QPalette.ColorRole.Window, QColor(COLORS["bg"]))
    palette.setColor(QPalette.ColorRole.Base, QColor(COLORS["card"]))
    palette.setColor(QPalette.ColorRole.AlternateBase, QColor("#F9FAFB"))
    palette.setColor(QPalette.ColorRole.Button, QColor(COLORS["card"]))
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText):
        palette.setColor(role, QColor(COLORS["text"]))
    palette.setColor(QPalette.ColorRole.PlaceholderText, QColor(COLORS["faint"]))
    palette.setColor(QPalette.ColorRole.Highlight, QColor(COLORS["accent"]))
    palette.setColor(QPalette.ColorRole.HighlightedText, QColor("#FFFFFF"))
    palette.setColor(QPalette.ColorRole.Link, QColor(COLORS["accent_dark"]))
    app.setPalette(palette)
    font = QFont(app.font())
    font.setPointSizeF(max(font.pointSizeF(), 10.0))
    app.setFont(font)
    # The combo box arrow is a file (style sheets take images by path; it is drawn in the muted color).
    arrow = resource("icons/combo-arrow.svg").as_posix()
    app.setStyleSheet(STYLE_SHEET % {**COLORS, "combo_arrow": arrow})
