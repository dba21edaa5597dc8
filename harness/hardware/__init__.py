"""The machine a job runs on, as facts: device detection, the target archs' limits, GPU
pinning and the environment a worker sees (running jobs in workers: harness.run.isolation)."""
