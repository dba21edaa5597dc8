"""Open the generated report in headless Chromium: it renders, offline, without errors.

Needs ``/usr/bin/chromium`` (Debian/Ubuntu: ``apt-get install -y --no-install-recommends
chromium fonts-dejavu-core``); the tests are skipped, saying so, when it is absent.

How "no console errors" is checked, and why this way:

* Chromium's ``--enable-logging=stderr --v=0`` writes every console message of the page
  (console.error/warn/log and uncaught exceptions alike, all at level INFO) as a
  ``...:INFO:CONSOLE...] "message", source: URL (line)`` line on stderr.  The report
  has no JavaScript at all, so the check is strict: ANY console line, or any
  ``Uncaught``, fails the test.  The rest of stderr (D-Bus, GPU, sandbox warnings of a
  headless container) is noise and is not scanned.
* A control page with a ``console.error`` and an uncaught ReferenceError is run through
  the same detector first: if a Chromium update changed the log format, the control
  fails instead of the real check silently passing.
* A broken image is not a console message, so ``--dump-dom`` gives the DOM as rendered:
  every ``<img>`` must be an inline ``data:image/png;base64`` that PIL decodes, nothing
  may reference an external URL, and the headings must be there.
* The screenshot (1280 x 2000) must not be blank (more than one colour), and must
  contain saturated pixels: the figures, which are the only coloured area at the top.
"""
from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from harness.report import build_report
from tests.report.test_report import HOSTILE, make_store

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]
CONSOLE_LINE = re.compile(r":CONSOLE[:(\]]|Uncaught")

pytestmark = pytest.mark.skipif(shutil.which(CHROMIUM) is None,
                                reason=f"{CHROMIUM} not installed (apt-get install -y chromium)")


def chromium(page: Path | str, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    """Run headless Chromium on ``page`` (a file, or a URL) with a throw-away profile; stdout and stderr text."""
    url = page if isinstance(page, str) else page.resolve().as_uri()
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *extra, url],
                          capture_output=True, text=True, timeout=120, check=False)


def console_lines(stderr: str) -> list[str]:
    """The lines of Chromium's stderr that are console messages or uncaught exceptions."""
    return [line for line in stderr.splitlines() if CONSOLE_LINE.search(line)]


class _Dom(HTMLParser):
    """Collects image sources, link/script references and headings of a dumped DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.references: list[str] = []
        self.scripts = 0
        self.headings: list[str] = []
        self._in_heading = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "img":
            self.images.append(a.get("src") or "")
        if tag == "script":
            self.scripts += 1
        for key in ("href", "src"):
            value = a.get(key) or ""
            if tag != "img" and value:
                self.references.append(value)
        self._in_heading = tag in ("h1", "h2")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h1", "h2"):
            self._in_heading = False

    def handle_data(self, data: str) -> None:
        if self._in_heading and data.strip():
            self.headings.append(data.strip())


@pytest.fixture(scope="module")
def report_page(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    store = make_store(root / "store")
    return build_report(store.uri, store.experiment, out_dir=root / "out")


def test_console_detector_catches_errors(tmp_path):
    """Control: the detector sees a console.error and an uncaught exception."""
    control = tmp_path / "control.html"
    control.write_text('<!DOCTYPE html><html><body><p>control</p><script>console.error("CTRL-ERR");'
                       "undefinedFunction();</script></body></html>")
    result = chromium(control, tmp_path / "profile", "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = console_lines(result.stderr)
    assert any("CTRL-ERR" in line for line in lines), result.stderr[-3000:]
    assert any("Uncaught ReferenceError" in line for line in lines), result.stderr[-3000:]


def test_report_renders_without_console_errors(report_page, tmp_path):
    result = chromium(report_page, tmp_path / "profile", "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    assert console_lines(result.stderr) == []

    dom = _Dom()
    dom.feed(result.stdout)
    assert dom.scripts == 0                       # the hostile shape name did not become a script
    assert dom.references == []                   # nothing external: works offline
    assert HOSTILE in result.stdout.replace("&lt;", "<").replace("&gt;", ">")   # shown as text
    assert len(dom.images) == 4
    for src in dom.images:
        prefix = "data:image/png;base64,"
        assert src.startswith(prefix)
        image = Image.open(io.BytesIO(base64.b64decode(src[len(prefix):])))
        image.verify()                            # a PNG the browser can decode
    for heading in ("Verdicts", "Best swizzle per group", "Figures", "All cells"):
        assert heading in dom.headings
    assert any(h.startswith("Failed or unfinished runs") for h in dom.headings)


def test_report_screenshot_is_not_blank(report_page, tmp_path):
    shot = tmp_path / "report.png"
    result = chromium(report_page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2000")
    assert result.returncode == 0, result.stderr[-2000:]
    assert console_lines(result.stderr) == []
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 2000)
    assert len(image.getcolors(maxcolors=1 << 24)) > 1, "screenshot is one flat colour"
    hsv = np.asarray(image.convert("HSV"))
    saturated = int(((hsv[..., 1] > 120) & (hsv[..., 2] > 60)).sum())
    assert saturated > 2000, f"only {saturated} coloured pixels: the figures did not render"
    print(f"screenshot: {shot}")


#: The measuring script: added to a copy of a page (the report itself has no script), it writes
#: into the DOM the viewport's width, the page's scroll width, the cell table's right edge
#: and its decision rows' median height (CSS px), after opening every <details> when the URL asks.
MEASURE = ('<script>if (location.hash === "#open") document.querySelectorAll("details").forEach(d => d.open = true);'
           'const t = document.querySelector("table.cells"), h = [...t.querySelectorAll("tr:not(.more)")].slice(1)'
           '.map(r => r.getBoundingClientRect().height).sort((a, b) => a - b);'
           'document.body.dataset.measured = [innerWidth, document.documentElement.scrollWidth,'
           't.getBoundingClientRect().right, h[h.length >> 1]].map(Math.ceil).join(" ");</script>')


def measure_cell_table(page: Path, tmp_path: Path, width: int = 1600, open_details: bool = False) -> dict[str, int]:
    """The cell table of ``page`` as Chromium lays it out in a ``width`` px wide window:
    ``viewport``, ``scroll_width`` (> viewport: the page scrolls sideways), ``table_right``
    and ``row_height`` (a decision row's median), in CSS px."""
    copy = tmp_path / f"measured-{page.parent.name}.html"
    copy.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    result = chromium(copy.resolve().as_uri() + ("#open" if open_details else ""), tmp_path / "profile",
                      "--dump-dom", f"--window-size={width},1000")
    assert result.returncode == 0, result.stderr[-2000:]
    found = re.search(r'data-measured="(\d+) (\d+) (\d+) (\d+)"', result.stdout)
    assert found, "the measuring script did not run"
    return dict(zip(("viewport", "scroll_width", "table_right", "row_height"), map(int, found.groups())))


def assert_cells_fit(page: Path, tmp_path: Path) -> None:
    """The decision table fits a 1,600 px window, closed and with every cell's details open,
    and a decision row is at most two lines tall (the row of the table before it: 49 px on this
    module's store, about 120 px on a CPU sweep's, where the config wrapped)."""
    for open_details in (False, True):
        m = measure_cell_table(page, tmp_path, open_details=open_details)
        assert m["viewport"] == 1600, m
        assert m["table_right"] <= m["viewport"] and m["scroll_width"] <= m["viewport"], (open_details, m)
        assert m["row_height"] <= 40, m


def test_width_check_sees_a_table_that_overflows(tmp_path):
    """Control: a cell table wider than the window is measured as overflowing."""
    wide = tmp_path / "wide" / "index.html"
    wide.parent.mkdir()
    wide.write_text('<!DOCTYPE html><html><body><table class="cells"><tr><th>h</th></tr><tr><td style="white-space:'
                    'nowrap">' + "overflowing " * 300 + "</td></tr></table></body></html>")
    m = measure_cell_table(wide, tmp_path)
    assert m["table_right"] > m["viewport"] and m["scroll_width"] > m["viewport"], m


def test_cell_table_fits_1600_px(report_page, tmp_path):
    """The report's decision columns fit a 1,600 px window; the details stay inside it too."""
    assert_cells_fit(report_page, tmp_path)
