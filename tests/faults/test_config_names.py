"""Unknown config names: Hydra's own refusal of an option a config group lacks is one line,
``error: GROUP=NAME: ...``, exit status 2, naming the closest option (``did you mean``) and
listing every valid one; nothing is logged, not even the sweep's run.  So is a key that a
group without a schema (``swizzle``, ``kernel``) lacks: its valid keys are the chosen option's,
and the keys other options of the group take are named with those options (read from the
group's YAML files)."""
from __future__ import annotations

import importlib.resources

import pytest
import yaml

from harness.errors import USER_ERROR_EXIT, did_you_mean
from tests.faults import FAST, harness, runs_of

GROUPS = ["kernel", "swizzle", "shape", "target", "profiler"]
#: a misspelled option -> the option the refusal suggests
MISSPELLED = {"swizzle=xdc": "xcd", "shape=resnte": "resnet", "kernel=igem": "igemm", "profiler=ncuu": "ncu"}


def _options(group: str) -> list[str]:
    folder = importlib.resources.files("swizzlebench_conf") / group
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


def _keys(group: str, option: str) -> list[str]:
    """The keys the shipped YAML file of ``group=option`` sets."""
    return sorted(yaml.safe_load((importlib.resources.files("swizzlebench_conf") / group / f"{option}.yaml").read_text()))


def _refused(seeded_store, override: str, experiment: str, extra: tuple[str, ...] = ()) -> str:
    """The one line the multirun ``override`` is refused with; checks exit 2 and no run logged."""
    group = override.split("=")[0].split(".")[0]
    proc = harness(["-m", *extra, override, *[o for o in FAST if not o.startswith(group)],
                    f"tracking.uri={seeded_store.uri}", f"experiment={experiment}",
                    f"hydra.sweep.dir={seeded_store.root}/{experiment}"], cwd=seeded_store.root, timeout=120)
    assert proc.returncode == USER_ERROR_EXIT, proc.stderr[-2000:]
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("error: "), \
        proc.stderr[-2000:]
    assert runs_of(seeded_store.uri, experiment, kind=None) == []
    return proc.stderr.strip()


@pytest.mark.parametrize("group", GROUPS)
def test_unknown_name_lists_the_valid_options(seeded_store, group):
    line = _refused(seeded_store, f"{group}=nope", f"unknown-{group}")
    assert line.startswith(f"error: {group}=nope: no {group} option 'nope'; "), line
    assert line.split("valid: ", 1)[1].split(", ") == _options(group)


@pytest.mark.parametrize("override", list(MISSPELLED))
def test_misspelled_name_suggests_the_closest(seeded_store, override):
    group = override.split("=")[0]
    line = _refused(seeded_store, override, f"misspelled-{group}")
    assert f"; did you mean {MISSPELLED[override]}? valid: " in line, line


def test_misspelled_swept_name_is_refused_before_the_sweep_starts(seeded_store):
    """A bad option among swept values (composed per job) is refused before the sweep's run."""
    line = _refused(seeded_store, "swizzle=identity,xdc", "misspelled-swept")
    assert line.startswith("error: swizzle=xdc: no swizzle option 'xdc'; did you mean xcd?"), line


@pytest.mark.parametrize("option", ["identity", "custom"])
def test_unknown_key_of_an_untyped_group_lists_its_keys(seeded_store, option):
    """``swizzle.formula=x`` (the key is ``expr``): with ``swizzle=custom`` ``expr`` is among the
    valid keys; with the default ``identity``, among those ``swizzle=custom`` takes."""
    line = _refused(seeded_store, "swizzle.formula=x", f"unknown-key-{option}", (f"swizzle={option}",))
    assert line.startswith("error: swizzle.formula is not a key of swizzle; valid: "), line
    valid = line.split("; valid: ", 1)[1].split("; ", 1)[0].split(", ")
    assert valid == _keys("swizzle", option)
    if option == "identity":
        assert ("; other swizzle options take: " in line and "expr, file, fn, label (swizzle=custom)" in line), line
    assert "expr" in line


def test_unknown_key_suggests_a_key_of_another_option(seeded_store):
    line = _refused(seeded_store, "swizzle.exr=x", "unknown-key-close")
    assert "; did you mean expr? valid: " in line, line


def test_unknown_kernel_key_lists_the_kernel_keys(seeded_store):
    line = _refused(seeded_store, "kernel.bogus=1", "unknown-key-kernel", ("kernel=igemm",))
    assert line == f"error: kernel.bogus is not a key of kernel; valid: {', '.join(_keys('kernel', 'igemm'))}"


@pytest.mark.parametrize("name, valid, suggested", [
    ("l3", ["l01", "l02", "l03", "l13", "l23"], "l03"),       # leading zeros and case do not count
    ("XCD", ["identity", "xcd", "xcd_grouped"], "xcd"),
    ("l99", ["l01", "l09", "l19"], "l09"),                     # a tie: the first listed
    ("hilbrt", ["grouped", "hilbert", "morton"], "hilbert"),
    ("nope", ["grouped", "hilbert"], None),                    # nothing close: no suggestion
])
def test_the_closest_name_is_suggested(name, valid, suggested):
    assert did_you_mean(name, valid) == (f"did you mean {suggested}? " if suggested else "")
