"""Hydra config tree of swizzlebench, installed as the package ``swizzlebench_conf``."""
