"""The documentation: the site builds with ``mkdocs build --strict`` (broken links, anchors and
snippets fail it), every relative link of README.md resolves, and README's set-up commands
are the ones CI and the docs' home page run."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FENCE = re.compile(r"^```.*?^```", flags=re.M | re.S)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", flags=re.I)


def _prose(markdown: str) -> str:
    """The Markdown without fenced code blocks and code spans (links there are not links)."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", markdown))


def _anchors(markdown: str) -> set[str]:
    """The heading ids Python-Markdown's toc gives the headings of ``markdown``."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", FENCE.sub("", markdown), flags=re.M)
    return {slugify(re.sub(r"[`*]", "", h), "-") for h in headings}


def _code_blocks(markdown: str) -> list[list[str]]:
    return [block.splitlines()[1:-1] for block in FENCE.findall(markdown)]


def test_mkdocs_build_strict(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert (tmp_path / "site" / "reference" / "config" / "index.html").is_file()


def test_every_relative_link_in_readme_resolves():
    links = LINK.findall(_prose(README.read_text()))
    relative = [link for link in links if not SCHEME.match(link) and not link.startswith("#")]
    assert any(link.startswith("docs/") for link in relative), "README links into docs/"
    broken = []
    for link in relative:
        path, _, anchor = link.partition("#")
        target = (README.parent / path).resolve()
        if not target.is_file():
            broken.append(f"{link}: no file {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")
        elif anchor and anchor not in _anchors(target.read_text()):
            broken.append(f"{link}: no heading #{anchor} in {path}")
    assert not broken, broken


def test_readme_opens_with_the_two_set_up_commands_ci_and_the_docs_run():
    """README's first code block: the install-and-sweep command and the test command; CI
    (.ci/run) runs the second one's install and test, then the cluster tests, and the docs' home
    page shows both."""
    first = _code_blocks(README.read_text())[0]
    assert len(first) == 2
    sweep, tests = first
    assert sweep.endswith("pip install torch==2.13.0 -e . && python -m harness -m swizzle=xcd,grouped shape=resnet")
    assert tests.endswith("pip install torch==2.13.0 -e '.[dev]' && python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "pip install -q torch==2.13.0 -e '.[dev]'" in ci and "python -m pytest" in ci
    assert ci[-1] == "python -m pytest -o addopts=\"\" -m cluster tests"     # after the README's command, apart
    assert first in _code_blocks((ROOT / "docs" / "index.md").read_text())
    assert len(README.read_text()) <= 8000, "README is the front door: keep it short, move reference text to docs/"


def test_the_benchmark_page_keeps_current_figures_only():
    """benchmarks/README.md, which the docs' Benchmarks page includes, holds the current figures
    and how to reproduce them; history goes to git and benchmarks/kernel_notes.md."""
    lines = (ROOT / "benchmarks" / "README.md").read_text().splitlines()
    assert len(lines) <= 400, f"benchmarks/README.md has {len(lines)} lines (at most 400): move history out"
