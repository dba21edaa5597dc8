"""docs/reference/config.md: generated from conf/, checked against the real CLI and the generator."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

import swizzlebench_conf
from harness.tools.config_reference import flatten, format_value, read_comments
from tests.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "config.md"
CONF = Path(swizzlebench_conf.__file__).parent
REGENERATE = "python -m harness.tools.config_reference > docs/reference/config.md"


def _run(args: list[str], cwd: Path) -> str:
    """``python -m MODULE ARGS`` (a fork of the tests' warm server: tests.cli_fork); its stdout."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = run_cli(args[1:], cwd, env, timeout=300, module=args[0])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def cli_job(tmp_path_factory) -> dict[str, object]:
    """Every key path of ``python -m harness --cfg job`` with its value, through the real CLI."""
    out = _run(["harness", "--cfg", "job"], tmp_path_factory.mktemp("cfg"))
    return dict(flatten(yaml.safe_load(out)))


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def test_page_lists_every_key_of_the_cli_job_config_with_its_default(cli_job):
    section = _section(PAGE.read_text(), "The default job config")
    rows = dict(re.findall(r"^\| `([^`]+)` \| `(.+?)` \|", section, flags=re.M))   # key -> default
    assert len(cli_job) > 50
    missing = sorted(set(cli_job) - set(rows))
    assert not missing, f"keys of --cfg job missing from {PAGE.name}: {missing}; run {REGENERATE}"
    wrong = {k: (rows[k], format_value(v)) for k, v in cli_job.items() if rows[k] != format_value(v)}
    assert not wrong, f"defaults differ from --cfg job (page, CLI): {wrong}; run {REGENERATE}"
    assert set(rows) == set(cli_job), f"keys --cfg job does not print: {sorted(set(rows) - set(cli_job))}"


def test_committed_page_is_what_the_generator_writes(tmp_path):
    generated = _run(["harness.tools.config_reference"], tmp_path)
    assert PAGE.read_text() == generated, f"docs/reference/config.md is stale: run {REGENERATE}"


def test_page_lists_every_group_and_option():
    text = PAGE.read_text()
    for path in sorted(CONF.glob("*/*.yaml")):
        group, option = path.parent.name, path.stem
        assert re.search(rf"^#### `\+?{group}={option}`$", text, flags=re.M), path


def test_comments_are_the_ones_written_in_the_yaml():
    text = PAGE.read_text()
    assert "| `compare.min_effect` | `0.01` | smallest speedup change called faster/slower (fraction: 0.01 = 1 %) |" in text
    assert ("| `tracking.uri` | `sqlite:///mlflow.db` | Embedded default: a SQLite store in the working "
            "directory.  A shared server: tracking.uri=http://host:5000 |") in text
    assert "| `isolation.timeout_s` | `600.0` | per job (gates + timing), s |" in text


def test_read_comments():
    text = """# The file's header,
# two lines.
name: x   # inline
# above a
# block
block:
  # above nested
  nested: 1  # and inline

  lost: 2
quoted: "a # not a comment"  # but this is
items:
  - {name: a}
  # belongs to after
after: {A: 1}
"""
    got = read_comments(text)
    assert got.header == ["The file's header,", "two lines."]
    assert got.keys == {"name": "inline", "block": "above a block", "block.nested": "above nested and inline",
                        "quoted": "but this is", "after": "belongs to after"}
    assert read_comments("# @package _global_\n# Header.\nkey: 1\n").package == "_global_"
