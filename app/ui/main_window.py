"""The main window: a sidebar (brand, pages, engine status) and the pages in a stack.

Files dropped anywhere on the window go to the Files page.

The Models page is built here, over the Settings page: it reads the settings from it, and the model it
is asked to use leaves through the Settings page's ``changed`` signal, the path every model change
takes (the coordinator saves the settings and has the engine load the model).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QCloseEvent, QColor, QIcon, QPainter
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from sayso.app.platform import assets
from sayso.app.ui.models_view import ModelsPage
from sayso.app.ui.style import COLORS
from sayso.app.ui.widgets import ElidedLabel, label

PAGES = (
    ("dictation", "Dictation", "mic"),
    ("files", "Files", "files"),
    ("history", "History", "history"),
    ("models", "Models", "models"),
    ("settings", "Settings", "settings"),
)
SIDEBAR_WIDTH = 212
COMPACT_SIDEBAR_WIDTH = 64  # the icons alone
COMPACT_WIDTH = 800  # a window narrower than this has the compact sidebar
_STATUS_COLORS = {"ready": COLORS["ok"], "loading": COLORS["working"], "error": COLORS["error"]}


def _nav_icon(name: str) -> QIcon:
    """Muted when idle, accent-colored on the selected page."""
    result = QIcon()
    for mode, color in ((QIcon.Mode.Normal, COLORS["muted"]), (QIcon.Mode.Selected, COLORS["accent_text"])):
        for scale in (1, 2):
            pixmap = assets.pixmap(name, color, 18 * scale)
            pixmap.setDevicePixelRatio(scale)
            result.addPixmap(pixmap, mode)
    return result


class StatusDot(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self._color = QColor(COLORS["faint"])
        self.setFixedSize(10, 10)

    def set_color(self, color: str) -> None:
        self._color = QColor(color)
        self.update()

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(self._color)
        painter.drawEllipse(1, 1, 8, 8)


class MainWindow(QMainWindow):
    files_dropped = Signal(list)  # [Path]
    close_requested = Signal()  # the window's close button: the coordinator hides or quits

    def __init__(self, pages: dict[str, QWidget]):
        """``pages``: every page of ``PAGES`` but the Models page, by key."""
        super().__init__()
        self.quitting = False  # set by the coordinator when Sayso quits: then the window may close
        self.setWindowTitle("Sayso")
        self.setWindowIcon(assets.app_icon())
        self.setAcceptDrops(True)
        self.resize(980, 660)
        self.setMinimumSize(640, 480)
        settings = pages["settings"]
        models = ModelsPage(settings.current)
        models.use_requested.connect(settings.changed)
        models.models_changed.connect(lambda: settings.load(settings.current()))  # its model list
        settings.changed.connect(models.show_settings)
        self.pages = {**pages, "models": models}

        root = QWidget()
        root.setObjectName("Content")
        row = QHBoxLayout(root)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)

        sidebar = self.sidebar = QWidget()
        sidebar.setObjectName("Sidebar")
        sidebar.setAttribute(Qt.WidgetAttribute.WA_StyledBackground)
        sidebar.setFixedWidth(SIDEBAR_WIDTH)
        side = QVBoxLayout(sidebar)
        side.setContentsMargins(0, 18, 0, 16)
        side.setSpacing(14)
        brand = QHBoxLayout()
        brand.setContentsMargins(20, 0, 20, 4)
        brand.setSpacing(10)
        logo = QLabel()
        logo.setPixmap(assets.app_icon().pixmap(QSize(30, 30)))
        brand.addWidget(logo)
        self.brand = label("Sayso", "Brand")
        brand.addWidget(self.brand)
        brand.addStretch(1)
        side.addLayout(brand)

        self.nav = QListWidget()
        self.nav.setObjectName("Nav")
        self.nav.setIconSize(QSize(18, 18))
        self.nav.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.stack = QStackedWidget()
        for key, title, icon in PAGES:
            item = QListWidgetItem(_nav_icon(icon), f"  {title}")
            item.setData(Qt.ItemDataRole.UserRole, key)
            item.setSizeHint(QSize(0, 40))
            self.nav.addItem(item)
            self.stack.addWidget(self.pages[key])
        self.nav.currentRowChanged.connect(self.stack.setCurrentIndex)
        side.addWidget(self.nav, 1)

        status = QHBoxLayout()
        status.setContentsMargins(20, 0, 16, 0)
        status.setSpacing(8)
        self.status_dot = StatusDot()
        status.addWidget(self.status_dot, 0, Qt.AlignmentFlag.AlignTop)
        texts = QVBoxLayout()
        texts.setSpacing(0)
        self.status_title = ElidedLabel("Starting…", mode=Qt.TextElideMode.ElideMiddle)
        self.status_title.setStyleSheet("font-weight: 600;")
        self.status_detail = label("", "Faint", wrap=True)
        texts.addWidget(self.status_title)
        texts.addWidget(self.status_detail)
        status.addLayout(texts, 1)
        side.addLayout(status)

        row.addWidget(sidebar)
        row.addWidget(self.stack, 1)
        self.setCentralWidget(root)
        self.show_page("dictation")

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._set_compact(event.size().width() < COMPACT_WIDTH)

    def _set_compact(self, compact: bool) -> None:
        """In a narrow window (a tiled half screen) the sidebar shows its icons only, each page's title
        its tooltip, and leaves the pages the width their rows need."""
        self.sidebar.setFixedWidth(COMPACT_SIDEBAR_WIDTH if compact else SIDEBAR_WIDTH)
        self.brand.setVisible(not compact)
        for i, (_, title, _) in enumerate(PAGES):
            item = self.nav.item(i)
            item.setText("" if compact else f"  {title}")
            item.setToolTip(title if compact else "")
        self.status_title.setVisible(not compact)
        self.status_detail.setVisible(not compact)

    def show_page(self, key: str) -> None:
        self.nav.setCurrentRow([k for k, _, _ in PAGES].index(key))

    def current_page(self) -> str:
        return PAGES[self.nav.currentRow()][0]

    def set_engine_status(self, state: str, title: str, detail: str = "") -> None:
        """``state``: ready, loading or error (the dot's color)."""
        self.status_dot.set_color(_STATUS_COLORS[state])
        self.status_dot.setToolTip(title)  # what the compact sidebar shows of it
        self.status_title.set_full_text(title)
        if detail.startswith(f"{title} on "):  # the engine's description repeats the model name
            detail = "Runs on " + detail.removeprefix(f"{title} on ")
        self.status_detail.setText(detail)
        self.status_detail.setToolTip(detail)

    # ---- drag and drop ------------------------------------------------------------------------------

    def dragEnterEvent(self, event) -> None:
        if any(url.isLocalFile() for url in event.mimeData().urls()):
            event.acceptProposedAction()
            self.show_page("files")
            self.pages["files"].set_drop_hover(True)

    def dragLeaveEvent(self, event) -> None:
        self.pages["files"].set_drop_hover(False)

    def dropEvent(self, event) -> None:
        self.pages["files"].set_drop_hover(False)
        paths = [Path(url.toLocalFile()) for url in event.mimeData().urls() if url.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            self.files_dropped.emit(paths)

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.quitting:  # Qt closes every window on quit: refusing would cancel the quit
            event.accept()
            return
        event.ignore()
        self.close_requested.emit()
