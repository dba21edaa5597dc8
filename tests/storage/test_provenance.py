"""harness.storage.provenance: the commit a result names, on a node without .git."""
import subprocess
import sys
from pathlib import Path

from harness.storage import provenance

ROOT = Path(__file__).resolve().parents[2]


def test_the_build_commit_file_is_the_one_the_wheelhouse_writes():
    # the wheelhouse writes <copy>/harness/BUILD_COMMIT; the package must read that very path
    assert provenance.build_commit_path() == ROOT / "harness" / provenance.BUILD_COMMIT_FILE


def test_a_recorded_commit_wins_over_git(tmp_path):
    """A copy of the package without .git, with a recorded commit (what a GPU node gets)."""
    copy = tmp_path / "site"
    (copy / "harness" / "storage").mkdir(parents=True)
    for name in ("harness/__init__.py", "harness/storage/__init__.py", "harness/storage/provenance.py"):
        (copy / name).write_text((ROOT / name).read_text() if (ROOT / name).exists() else "")
    (copy / "harness" / "BUILD_COMMIT").write_text("0123abc\n")
    code = "from harness.storage.provenance import git_commit; print(git_commit())"
    out = subprocess.run([sys.executable, "-c", code], cwd=copy, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(copy)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0123abc"
