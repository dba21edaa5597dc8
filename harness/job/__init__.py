"""What one job is: its spec (JobSpec) and how the typed config builds it, its shapes, the
user's code by import path, the target's launch limits, the deliberate faults, and the job's
result record."""
