"""The compile stage: a job's launch compiled ahead of time for its target (build), the
report cache and the helper process that compiles under the Triton interpreter (client,
worker)."""
