"""``python -m harness.report``: see :mod:`harness.report.cli`."""
import sys

from harness.report.cli import main

sys.exit(main())
