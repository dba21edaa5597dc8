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


def cell_rows(part: str) -> list[dict[str, str]]:
    """The "All cells" table of ``part``, one dict per cell: its decision columns (by heading)
    and its details (by label), unescaped."""
    heads = [html.unescape(h) for h in re.findall(r"<th>(.*?)</th>", part)]
    cells: list[dict[str, str]] = []
    for classes, row in re.findall(r'<tr class="([^"]*)">(.*?)</tr>', part, flags=re.S):
        if classes == "more":
            pairs = re.findall(r"<dt>(.*?)</dt><dd[^>]*>(.*?)</dd>", row)
            cells[-1].update((html.unescape(k), html.unescape(v)) for k, v in pairs)
        else:
            cells.append(dict(zip(heads, (html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)))))
    return cells
