"""The job pipeline: a spec, its gates (permutation, correctness), tuning, paired timing and
its statistics, the job's result."""
