"""The lists of config options the docs show (presets, swizzles, kernels, ...), generated
from the config tree (``conf/``) so that they cannot drift from it.

A list sits in a page between two HTML comments on one line, which Markdown does not show::

    the shape preset (<!-- list:shape -->`seed` (default), `calibrate` (6 layers), ...<!-- /list -->)

    python -m harness.tools.doc_lists          # rewrite every list in README.md and docs/*.md
    python -m harness.tools.doc_lists --check  # exit 1, naming the pages, if one is stale

The lists (:data:`LISTS`): ``shape`` (the presets, with their numbers of layers), ``kernel``,
``swizzle`` (the named remaps), ``family`` (the parametric families: a YAML with a
``family`` key), ``target``, ``profiler``, ``tune``; the default option first, marked
``(default)``, the others in natural order (``unseen2`` before ``unseen10``).
``tests/tools/test_doc_lists.py`` checks that every page is what this writes.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
#: The pages the lists live in.
PAGES = ("README.md", "docs/*.md")
MARKER = re.compile(r"<!-- list:(?P<name>[a-z_]+) -->(?P<body>.*?)<!-- /list -->")


def _natural(name: str) -> list:
    """``unseen10`` after ``unseen9``: digits compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def defaults(conf: Path = CONF) -> dict[str, str]:
    """Group -> its default option, from ``config.yaml``'s defaults list."""
    entries = yaml.safe_load((conf / "config.yaml").read_text())["defaults"]
    return {k: v for entry in entries if isinstance(entry, dict) for k, v in entry.items()}


def options(group: str, conf: Path = CONF) -> dict[str, dict]:
    """Option name -> its YAML (a mapping) of config group ``group``, in natural order."""
    files = sorted((conf / group).glob("*.yaml"), key=lambda p: _natural(p.stem))
    return {p.stem: yaml.safe_load(p.read_text()) or {} for p in files}


def _listed(group: str, names: list[str], conf: Path, notes: dict[str, str] | None = None) -> str:
    """```seed` (default), `calibrate` (6 layers), ...``: the default first."""
    default = defaults(conf).get(group)
    ordered = [n for n in names if n == default] + [n for n in names if n != default]
    notes = notes or {}
    words = [f"`{n}`" + (" (default" + (f", {notes[n]}" if n in notes else "") + ")" if n == default else
                         f" ({notes[n]})" if n in notes else "") for n in ordered]
    return ", ".join(words)


def _layers(n: int) -> str:
    return f"{n} layer" + ("" if n == 1 else "s")


def _shape(conf: Path) -> str:
    presets = options("shape", conf)
    layers = {name: _layers(len(cfg.get("shapes") or [])) for name, cfg in presets.items()}
    return _listed("shape", list(presets), conf, layers)


def _swizzle(conf: Path, families: bool) -> str:
    names = [n for n, cfg in options("swizzle", conf).items() if ("family" in cfg) == families]
    return _listed("swizzle", names, conf)


def _group(group: str):
    return lambda conf: _listed(group, list(options(group, conf)), conf)


#: List name -> what writes it from a config tree.
LISTS = {"shape": _shape, "kernel": _group("kernel"), "swizzle": lambda conf: _swizzle(conf, False),
         "family": lambda conf: _swizzle(conf, True), "target": _group("target"),
         "profiler": _group("profiler"), "tune": _group("tune")}


def fill(text: str, conf: Path = CONF) -> str:
    """``text`` with every list between its markers written anew from ``conf``; an unknown
    list name raises KeyError."""
    return MARKER.sub(lambda m: f"<!-- list:{m['name']} -->{LISTS[m['name']](conf)}<!-- /list -->", text)


def pages(root: Path = ROOT) -> list[Path]:
    """The pages that may hold lists."""
    return sorted(p for pattern in PAGES for p in root.glob(pattern))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.tools.doc_lists", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say which pages are stale (exit 1)")
    args = parser.parse_args(argv)
    stale = []
    for page in pages():
        text = page.read_text()
        new = fill(text)
        if new != text:
            stale.append(page.relative_to(ROOT))
            if not args.check:
                page.write_text(new)
    if stale:
        print(("stale: " if args.check else "rewrote: ") + ", ".join(map(str, stale)))
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
