"""Tune modes (config group ``tune``): launch the configured config; search the kernel's space
on this device; or look the layer up in the kernel's committed table for the target
(:mod:`kernels.tuned`: no timing).  Apart from :mod:`harness.tune.search` so that a command's
early checks (harness.preflight) name them without importing the search."""
NONE, FASTEST, TABLE = "none", "fastest", "table"
TUNE_MODES = (NONE, FASTEST, TABLE)
