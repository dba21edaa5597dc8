"""Where results go: MLflow tracking, the offline spool and its sync, provenance tags, the one
mapping of a job's outcome to MLflow names (run_fields), a search's trial rows."""
