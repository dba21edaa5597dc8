"""Tune mode: the search for the fastest verified launch config (search), its disk cache
(cache), the near-tie rule (ties), tuning inside one job (per_job), and which configs a
comparison runs on (best_vs_best).  The candidate spaces are the kernels' own
(``kernels.tuning``, ``ConvKernel.tune_space``)."""
