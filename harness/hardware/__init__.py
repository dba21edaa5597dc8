"""The machine a job runs on: device detection, GPU pinning, worker-process isolation."""
