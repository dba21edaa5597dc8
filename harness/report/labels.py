"""How a run's fields read in the report's cells: its swizzle (label, or label and formula
hash where two formulas share a label), shape, launch config and tiles, from the runs'
frame (harness.report.data.runs_to_frame)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from harness.job.spec import code_digest
from harness.storage.field_names import Param, param_column
from kernels.tuning import SHORT_TILE_NAMES

#: The column prefix of a run's ``tile.*`` params.
_TILES = param_column(Param.TILE_PREFIX)


def frame_column(frame: pd.DataFrame, name: str, default: object = np.nan) -> pd.Series:
    """Column ``name`` of ``frame``, or a column of ``default`` when it is absent."""
    if name in frame.columns:
        return frame[name]
    return pd.Series(default, index=frame.index, dtype=object if isinstance(default, str) else float)


def shape_label(frame: pd.DataFrame) -> pd.Series:
    """``shape.name``, prefixed by the preset when it differs (as ``JobSpec.shape_label``)."""
    name = frame_column(frame, param_column(Param.SHAPE_NAME), "").fillna("").astype(str)
    preset = frame_column(frame, param_column(Param.SHAPE_PRESET), "").fillna("").astype(str)
    prefixed = preset + "-" + name
    return name.where((preset == name) | (preset == ""), prefixed)


def swizzle_label(frame: pd.DataFrame) -> pd.Series:
    """Each run's swizzle as its cell names it: its label (param ``swizzle``), followed by
    ``#`` and the first 8 hex of the SHA-256 of its formula (or import path) where runs of
    different formulas share the label (two YAMLs, or ``swizzle.label``, naming two remaps
    alike): two cells, never one superseding the other.  A built-in keeps its bare name.
    The runs' MLflow names say the same (harness.storage.run_names)."""
    label = frame_column(frame, param_column(Param.SWIZZLE), "?").fillna("?").astype(str)
    code = frame_column(frame, param_column(Param.SWIZZLE_FORMULA), "").fillna("").astype(str)
    code = code.where(code != "", frame_column(frame, param_column(Param.SWIZZLE_FN), "").fillna("").astype(str))
    shared = code.groupby(label).transform("nunique") > 1
    digest = code.map(code_digest)
    return label.where(~shared | (code == ""), label + "#" + digest)


def _tile(column: str) -> str:
    """A ``tile.*`` param's tile name (``BLOCK_M``) from its column."""
    return column.removeprefix(_TILES)


def config_label(frame: pd.DataFrame) -> pd.Series:
    """The launch config of each run as ``Config.label`` writes it (``M128 N64 K64 w4 s3``):
    tune mode's choice (param ``tune.config``), else the run's ``tile.*`` params (BLOCK_M, N, K
    first, then the flags by name), ``num_warps`` and ``num_stages``."""
    cols = sorted((c for c in frame.columns if c.startswith(_TILES)),
                  key=lambda c: (list(SHORT_TILE_NAMES).index(_tile(c)) if _tile(c) in SHORT_TILE_NAMES else 9, c))
    warps, stages = param_column(Param.NUM_WARPS), param_column(Param.NUM_STAGES)

    def configured(row: pd.Series) -> str:
        tiles = [f"{SHORT_TILE_NAMES.get(_tile(c), _tile(c))}{row[c]}" for c in cols if pd.notna(row[c])]
        return " ".join(tiles + [f"w{row.get(warps, '?')}", f"s{row.get(stages, '?')}"])

    labels = frame.apply(configured, axis=1) if len(frame) else pd.Series("", index=frame.index, dtype=object)
    tuned = frame_column(frame, param_column(Param.TUNE_CONFIG), "")
    return tuned.where(tuned.notna() & (tuned != ""), labels).astype(str)


def tiles_label(frame: pd.DataFrame) -> pd.Series:
    """``BLOCK_M=128 BLOCK_N=128 ...`` from the ``tile.*`` params a run has (kernel
    families have different tile names; absent ones are left out, not shown as ``?``)."""
    cols = sorted(c for c in frame.columns if c.startswith(_TILES))
    if not cols:
        return pd.Series("", index=frame.index, dtype=object)
    tiles = frame[cols].rename(columns=_tile)
    return tiles.apply(lambda row: " ".join(f"{k}={v}" for k, v in row.items() if pd.notna(v)), axis=1)
