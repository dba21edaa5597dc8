"""Notices: what the harness decided for the user, printed as INFO lines once per sweep.

A notice (``target=auto resolved to mi300x ...``, a launch config given on the command line
taking over from ``tune=table``) is printed only once the command's checks have passed
(harness.preflight: no notice before an error), and once per sweep: in a multirun the
launching process checks every job's config first and prints their notices; a job that
checks its config again (one the launching process did not check, or one run in a launcher's
worker) finds its notices already printed.  What was printed is kept in
the environment (:data:`SHOWN_ENV`), so that job processes started by the launching process
(a launcher's workers) do not print it again either.
"""
from __future__ import annotations

import hashlib
import logging
import os

log = logging.getLogger("swizzlebench")

#: Environment variable holding the digests of the notices printed in this sweep, space-separated.
SHOWN_ENV = "SWIZZLEBENCH_NOTICES_SHOWN"


def start_sweep() -> None:
    """Forget the notices printed so far: a new sweep prints its own."""
    os.environ.pop(SHOWN_ENV, None)


def show(*notices: str | None) -> None:
    """Log each notice (None: none) at INFO unless this sweep printed it already."""
    shown = os.environ.get(SHOWN_ENV, "").split()
    for text in notices:
        digest = hashlib.sha256(text.encode()).hexdigest()[:16] if text else None
        if digest is not None and digest not in shown:
            log.info("%s", text)
            shown.append(digest)
    if shown:
        os.environ[SHOWN_ENV] = " ".join(shown)
