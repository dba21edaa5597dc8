"""The docs' lists of presets, kernels, swizzles, ... are what harness.tools.doc_lists writes
from conf/ now: adding a preset without regenerating them fails here
(``python -m harness.tools.doc_lists`` rewrites them)."""
from __future__ import annotations

import shutil

import pytest

from harness.tools import doc_lists


@pytest.mark.parametrize("page", doc_lists.pages(), ids=lambda p: str(p.relative_to(doc_lists.ROOT)))
def test_every_list_in_the_docs_is_current(page):
    text = page.read_text()
    assert doc_lists.fill(text) == text, f"{page.name} is stale: run python -m harness.tools.doc_lists"


def test_the_readme_lists_every_preset_kernel_and_swizzle():
    text = (doc_lists.ROOT / "README.md").read_text()
    for group in ("shape", "kernel", "swizzle"):
        assert f"<!-- list:{group} -->" in text
        for name in doc_lists.options(group):
            assert f"`{name}`" in text, name
    assert "`unseen10` (6 layers)" in text and "`seed` (default, 1 layer)" in text


def test_a_new_preset_makes_the_lists_stale(tmp_path):
    """Control: the same page against a config tree with one more preset is rewritten, the
    preset added in natural order; an unknown list name is an error."""
    conf = tmp_path / "conf"
    shutil.copytree(doc_lists.CONF, conf, ignore=shutil.ignore_patterns("__pycache__"))
    (conf / "shape" / "unseen11.yaml").write_text("name: unseen11\nshapes:\n  - {name: a}\n  - {name: b}\n")
    page = "presets: <!-- list:shape -->`seed`<!-- /list -->."
    assert doc_lists.fill(page, conf).endswith("`unseen10` (6 layers), `unseen11` (2 layers)<!-- /list -->.")
    current = (doc_lists.ROOT / "README.md").read_text()
    assert doc_lists.fill(current, conf) != current
    with pytest.raises(KeyError):
        doc_lists.fill("<!-- list:nonsense -->x<!-- /list -->", conf)


def test_check_mode_says_which_pages_are_stale(monkeypatch, tmp_path, capsys):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("<!-- list:tune -->`none`<!-- /list -->\n")
    monkeypatch.setattr(doc_lists, "ROOT", tmp_path)
    monkeypatch.setattr(doc_lists, "pages", lambda root=tmp_path: [tmp_path / "README.md"])
    assert doc_lists.main(["--check"]) == 1 and "stale: README.md" in capsys.readouterr().out
    assert doc_lists.main([]) == 0 and "`table` (default)" in (tmp_path / "README.md").read_text()
