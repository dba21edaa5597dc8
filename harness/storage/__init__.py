"""Where results go: MLflow tracking, the offline spool and its sync, store probes (a store
that cannot be opened, found in seconds), claims (a spec run once across live sweeps),
provenance tags, the one mapping of a job's outcome to MLflow names (run_fields), a search's
trial rows."""
