"""Third-party warnings that say nothing to a user of swizzlebench, filtered where the call
that raises them is made: torch.profiler's "Profiler clears events at the end of each
cycle" (the cupti timer opens one profiler session per job, and reads only its own), and
seaborn's deprecations of matplotlib calls it makes itself.  They are kept, as Python
prints them, under ``HYDRA_FULL_ERROR=1`` or ``hydra.verbose`` (the root logger at DEBUG).
"""
from __future__ import annotations

import contextlib
import logging
import warnings
from typing import Iterator

from harness.errors import full_error_requested

#: torch.profiler's warning when a profile session's events are cleared between cycles.
PROFILER_CLEARS_EVENTS = r".*Profiler clears events at the end of each cycle"


def verbose() -> bool:
    """Whether the user asked for everything: ``HYDRA_FULL_ERROR=1``, or ``hydra.verbose``
    (Hydra then sets the root logger to DEBUG)."""
    return full_error_requested() or logging.getLogger().isEnabledFor(logging.DEBUG)


@contextlib.contextmanager
def quiet(message: str = "", category: type[Warning] = Warning, module: str = "") -> Iterator[None]:
    """Inside: warnings of ``category`` whose text matches ``message`` (a regex, from its
    start) and raised from ``module`` (a regex) are not shown, unless :func:`verbose`."""
    if verbose():
        yield
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=message, category=category, module=module)
        yield
