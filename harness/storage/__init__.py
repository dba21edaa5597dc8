"""Where results go: MLflow tracking, the offline spool and its sync, provenance tags."""
