"""Hydra config tree of swizzlebench, installed as the package ``swizzlebench_conf``."""

from harness.schema import register

register()   # the schema (base_config) every composition of this tree starts from
