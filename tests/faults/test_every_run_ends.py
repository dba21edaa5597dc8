"""Every run ends (issue 42, item 1): text that cannot be encoded (a non-UTF-8 byte of the
command line, a lone surrogate in a YAML formula) and a ``swizzle.fn`` module that ends its
process at import (``sys.exit(3)``, ``os._exit(3)``) each end as a FAILED run with a one-line
reason; the user's text is stored escaped; no run of the store is left RUNNING."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from tests.faults import FAST, cli_env, job_lines, reason, runs_of

#: case -> (extra arguments, what the FAILED reason must say)
MODULES = {"exits": "import sys\nsys.exit(3)\n", "hard_exits": "import os\nos._exit(3)\n"}
CASES = {
    "non_utf8_expr": ([b"swizzle=custom", b'swizzle.expr="pid + \xe9"'], "character '\\udce9' is not allowed"),
    "surrogate_yaml": (["--config-dir={conf}", "swizzle=surrogate"], "character '\\udce9' is not allowed"),
    "sys_exit_at_import": (["swizzle=custom", "swizzle.fn=exits:remap"], "SystemExit: 3"),
    "os_exit_at_import": (["swizzle=custom", "swizzle.fn=hard_exits:remap"],
                          "ended its process with exit status 3"),
}


def _store_path(uri: str) -> str:
    return uri.removeprefix("sqlite:///")


@pytest.mark.parametrize("case", list(CASES))
def test_run_ends_failed_with_one_line_reason(seeded_store, tmp_path, case):
    extra, words = CASES[case]
    (tmp_path / "swizzle").mkdir()
    (tmp_path / "swizzle" / "surrogate.yaml").write_text('name: custom\nexpr: "pid + \\udce9"\ngroup_size: 8\n')
    for module, source in MODULES.items():
        (tmp_path / f"{module}.py").write_text(source)
    experiment = f"ends-{case}"
    args = [a.replace("{conf}", str(tmp_path)) if isinstance(a, str) else a for a in extra]
    options = [a for a in args if isinstance(a, str) and a.startswith("--")]
    args = [a for a in args if a not in options]
    common = ["-m", *options, "shape=tiny", "shape.select=[t1]", *FAST, f"tracking.uri={seeded_store.uri}",
              f"experiment={experiment}", f"hydra.sweep.dir={tmp_path}/sweep"]
    proc = subprocess.run([sys.executable.encode(), b"-m", b"harness", *[os.fsencode(a) for a in common + args]],
                          cwd=tmp_path, env={**cli_env(), "PYTHONPATH": str(tmp_path)}, capture_output=True,
                          timeout=240)
    stdout, stderr = (s.decode("utf-8", "backslashreplace") for s in (proc.stdout, proc.stderr))
    assert proc.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    run, = runs_of(seeded_store.uri, experiment)
    assert run.info.status == "FAILED"
    assert words in reason(run), reason(run)
    line, = job_lines(subprocess.CompletedProcess([], 0, stdout, stderr))
    assert "FAILED" in line
    with sqlite3.connect(_store_path(seeded_store.uri)) as db:
        assert db.execute("select count(*) from runs where status='RUNNING'").fetchone() == (0,)
        unexplained = db.execute("select count(*) from runs r where r.status='FAILED' and not exists "
                                 "(select 1 from tags t where t.run_uuid=r.run_uuid and t.key='status_reason')")
        assert unexplained.fetchone() == (0,)
