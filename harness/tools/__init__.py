"""Tooling around the harness (an offline wheelhouse for GPU nodes)."""
