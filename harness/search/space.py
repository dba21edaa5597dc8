"""What a swizzle search may try: parametric families and parametrised formulas, as an
Optuna define-by-run space, and the Hydra overrides that launch one candidate.

A trial first picks a *family* (categorical), then that family's parameters, each a
categorical over explicit integer choices (powers of two by default; see
:data:`swizzles.families.FAMILIES`).  Optuna parameter names are ``family`` and
``<family>.<param>``; ``chunk`` is only drawn when ``num_xcds > 1`` (it does nothing
otherwise).  A formula family is ``formula:<name>``: a formula of the language of
:mod:`swizzles.custom` with free integer names bound per trial.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from swizzles.custom import bind_parameters, parse_formula
from swizzles.families import FAMILIES, family_instance

FORMULA_PREFIX = "formula:"
#: The Optuna parameter that picks a trial's family (an Optuna name, not an MLflow one).
FAMILY_PARAM = "family"
_FORMULA_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}\Z")

#: The built-in swizzles that are points of the families: name -> (family, parameters with
#: ``num_xcds`` standing for the target's XCD count).  Used to warm-start a search.
BUILTIN_POINTS: dict[str, tuple[str, dict[str, int | str]]] = {
    "identity": ("grouped_m", {"num_xcds": 1, "group_size": 1}),
    "grouped": ("grouped_m", {"num_xcds": 1, "group_size": 8}),
    "xcd": ("grouped_m", {"num_xcds": "target", "chunk": 0, "group_size": 1}),
    "xcd_grouped": ("grouped_m", {"num_xcds": "target", "chunk": 0, "group_size": 8}),
}


@dataclass(frozen=True)
class FormulaFamily:
    """A formula with free integer parameters, each tried over its choices."""

    name: str
    expr: str
    params: dict[str, tuple[int, ...]]

    def bound(self, values: Mapping[str, int]) -> str:
        return bind_parameters(self.expr, dict(values))


@dataclass(frozen=True)
class Candidate:
    """One point of the space: its swizzle label, its family and parameters, and the Hydra
    overrides that select it for a job."""

    label: str
    family: str
    params: dict[str, int]
    overrides: tuple[str, ...]


@dataclass
class SearchSpace:
    """Families (names of :data:`FAMILIES`) and formula families to search, for a target
    with ``target_xcds`` XCDs.  ``choices`` overrides a parameter's choices, keyed
    ``<family>.<param>``.  ``formula_dir`` is where bound formulas are written for jobs."""

    families: tuple[str, ...]
    formulas: tuple[FormulaFamily, ...] = ()
    target_xcds: int = 8
    choices: dict[str, tuple[int, ...]] = field(default_factory=dict)
    formula_dir: Path = Path("formulas")

    def __post_init__(self) -> None:
        unknown = [f for f in self.families if f not in FAMILIES]
        if unknown:
            raise ValueError(f"search families {unknown} are unknown; valid: {', '.join(FAMILIES)}")
        if not self.families and not self.formulas:
            raise ValueError("the search space is empty: give hydra.sweeper.families and/or hydra.sweeper.formulas")
        known = {f"{f}.{p.name}" for f in self.families for p in FAMILIES[f].all_params}
        bad = [k for k in self.choices if k not in known]
        if bad:
            raise ValueError(f"hydra.sweeper.space entries {bad} name no parameter of the searched families; "
                             f"valid: {', '.join(sorted(known))}")
        for key, values in self.choices.items():
            family, name = key.split(".", 1)
            param = next(p for p in FAMILIES[family].all_params if p.name == name)
            if not values:
                raise ValueError(f"hydra.sweeper.space.{key} is empty")
            for value in values:
                param.check(family, value)

    @property
    def family_names(self) -> list[str]:
        """The values of the ``family`` categorical."""
        return [*self.families, *(FORMULA_PREFIX + f.name for f in self.formulas)]

    def fingerprint(self) -> str:
        """First 8 hex digits of a hash of the space (a changed space is a new study)."""
        blob = json.dumps({"families": list(self.families), "target_xcds": self.target_xcds,
                           "choices": {k: list(v) for k, v in sorted(self.choices.items())},
                           "formulas": [[f.name, f.expr, {k: list(v) for k, v in f.params.items()}]
                                        for f in self.formulas]}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:8]

    def _choices(self, family: str, name: str) -> tuple[int, ...]:
        key = f"{family}.{name}"
        if key in self.choices:
            return tuple(self.choices[key])
        if name == "num_xcds":
            return (1,) if self.target_xcds == 1 else (1, self.target_xcds)
        return next(p for p in FAMILIES[family].all_params if p.name == name).choices

    def suggest(self, trial: Any) -> Candidate:
        """Draw a candidate with an Optuna trial (``trial.suggest_categorical`` only)."""
        family = trial.suggest_categorical(FAMILY_PARAM, self.family_names)
        if family.startswith(FORMULA_PREFIX):
            formula = self._formula(family)
            values = {k: trial.suggest_categorical(f"{family}.{k}", list(v)) for k, v in formula.params.items()}
            return self.formula_candidate(formula, values)
        values: dict[str, int] = {}
        for param in FAMILIES[family].all_params:
            if param.name == "chunk" and values["num_xcds"] == 1:
                values["chunk"] = 0
                continue
            values[param.name] = trial.suggest_categorical(f"{family}.{param.name}",
                                                           list(self._choices(family, param.name)))
        return self.family_candidate(family, values)

    def candidate_from_params(self, params: Mapping[str, Any]) -> Candidate:
        """Rebuild the candidate of a stored trial from its Optuna parameters."""
        family = params[FAMILY_PARAM]
        prefix = f"{family}."
        values = {k[len(prefix):]: int(v) for k, v in params.items() if k.startswith(prefix)}
        if family.startswith(FORMULA_PREFIX):
            return self.formula_candidate(self._formula(family), values)
        values.setdefault("chunk", 0)
        return self.family_candidate(family, values)

    def family_candidate(self, family: str, values: Mapping[str, int]) -> Candidate:
        instance = family_instance(family, values)
        overrides = (f"swizzle={family}", *(f"swizzle.{k}={v}" for k, v in instance.values))
        return Candidate(instance.label, family, instance.params, overrides)

    def formula_candidate(self, formula: FormulaFamily, values: Mapping[str, int]) -> Candidate:
        """The candidate of a bound formula: written to ``formula_dir`` (content-addressed)
        and selected with ``swizzle=custom swizzle.file=...``."""
        text = parse_formula(formula.bound(values)).text
        label = f"{FORMULA_PREFIX}{formula.name}[{','.join(f'{k}={v}' for k, v in values.items())}]"
        self.formula_dir.mkdir(parents=True, exist_ok=True)
        path = self.formula_dir / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.txt"
        path.write_text(text)
        overrides = ("swizzle=custom", f"swizzle.file='{path.resolve()}'", f"swizzle.label='{label}'",
                     f"swizzle.num_xcds={self.target_xcds}")
        return Candidate(label, FORMULA_PREFIX + formula.name, dict(values), overrides)

    def _formula(self, family: str) -> FormulaFamily:
        name = family[len(FORMULA_PREFIX):]
        return next(f for f in self.formulas if f.name == name)

    def builtin_params(self, name: str) -> dict[str, Any] | None:
        """The Optuna parameters of the family point equal to built-in ``name`` (for
        ``study.enqueue_trial``), or None when its family is not searched."""
        if name not in BUILTIN_POINTS:
            return None
        family, values = BUILTIN_POINTS[name]
        if family not in self.families:
            return None
        params: dict[str, Any] = {FAMILY_PARAM: family}
        for key, value in values.items():
            if key == "chunk" and params.get(f"{family}.num_xcds") == 1:
                continue
            params[f"{family}.{key}"] = self.target_xcds if value == "target" else value
        return params


def formula_families(config: Mapping[str, Any]) -> tuple[FormulaFamily, ...]:
    """Formula families from ``hydra.sweeper.formulas``: ``{name: {expr: "...", params: {k: [1, 2]}}}``.
    Each is checked now with its first choices, so a bad formula stops the search at once."""
    out = []
    for name, entry in (config or {}).items():
        if not _FORMULA_NAME.match(str(name)):
            raise ValueError(f"hydra.sweeper.formulas: name {name!r} is invalid; use a-z, 0-9, _ "
                             "(starting with a letter, at most 40 characters)")
        if not isinstance(entry, Mapping) or "expr" not in entry:
            raise ValueError(f"hydra.sweeper.formulas.{name} needs expr: \"...\" (and optionally params: "
                             "{k: [choices]})")
        params = {str(k): tuple(int(v) for v in values) for k, values in (entry.get("params") or {}).items()}
        empty = [k for k, v in params.items() if not v]
        if empty:
            raise ValueError(f"hydra.sweeper.formulas.{name}.params {empty} have no choices")
        formula = FormulaFamily(str(name), str(entry["expr"]), params)
        parse_formula(formula.bound({k: v[0] for k, v in params.items()}))
        out.append(formula)
    return tuple(out)
