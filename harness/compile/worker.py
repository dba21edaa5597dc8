"""The compile stage's helper process, for jobs running under the Triton interpreter.

Under ``TRITON_INTERPRET=1`` every ``@triton.jit`` function is an interpreted one, which
``triton.compile`` cannot take; this process is started without that variable (by
:class:`harness.compile.build.CompileClient`), so its kernels are real jit functions.
It reads one JSON request per line on stdin, ``{"spec": JobSpec dict, "arch": "gfx942"}``,
and answers one line on stdout, ``{"report": CompileReport dict}`` or ``{"error": reason}``.
Anything else it prints goes to stderr, which the client quotes if the process dies.

    python -m harness.compile.worker < requests.jsonl
"""
from __future__ import annotations

import json
import sys


def serve(stdin=sys.stdin, stdout=sys.stdout) -> None:
    from harness.compile.build import CompileFailed, compile_spec
    from harness.job.spec import JobSpec

    for line in stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            report = compile_spec(JobSpec.from_dict(request["spec"]), request["arch"])
            reply = {"report": report.to_dict()}
        except CompileFailed as exc:
            reply = {"error": str(exc)}
        except Exception as exc:   # a bug of ours or of the kernel's launcher: the job fails with it
            text = str(exc).strip().splitlines()
            reply = {"error": f"compile error: {type(exc).__name__}: {text[0][:400] if text else ''}"}
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()


if __name__ == "__main__":
    out, sys.stdout = sys.stdout, sys.stderr    # stray prints (warnings, libraries) must not break the protocol
    serve(sys.stdin, out)
