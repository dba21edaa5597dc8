"""Reading a generated report page in tests: a section's HTML and its table rows as text."""
from __future__ import annotations

import html
import re


def section(text: str, start: str, end: str) -> str:
    """The page's HTML from ``start`` up to (not including) ``end``."""
    first = text.index(start)
    return text[first:text.index(end, first)]


def table_rows(part: str) -> list[list[str]]:
    """Every table row of ``part`` with cells (``<td>``), as unescaped cell texts."""
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr[^>]*>(.*?)</tr>", part)]
    return [[html.unescape(cell) for cell in row] for row in rows if row]
