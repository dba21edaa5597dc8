"""Running jobs: one job's steps (steps: plan -> compile -> verify -> measure), the worker
process that isolates them (isolation), the L2 stage after them (l2), and the live line per
job (progress)."""
