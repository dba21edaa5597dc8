"""The config reference page, generated from the config tree (``conf/``).

    python -m harness.tools.config_reference > docs/reference/config.md

It composes the default job config with Hydra's compose API, as ``python -m harness --cfg
job`` does, and lists every key path with its default and the comment written beside it
(``key: value  # comment``) or in the comment lines directly above it (a key no YAML file
sets is listed under the schema, ``harness/schema.py``, whose default it is); then, for every config
group (a folder of ``conf/``), its options (YAML files) with the keys each one sets.  Comments
are read line by line (:func:`read_comments`): the config files are plain block YAML with
flow mappings on one line, which is all the reader understands.  The comment block that
opens a file describes the file, not its first key.

``tests/tools/test_config_reference.py`` checks the page against the real CLI and against
this generator, so the committed page cannot drift from the configs.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import yaml
from hydra import compose, initialize_config_module
from omegaconf import DictConfig, OmegaConf

CONFIG_MODULE = "swizzlebench_conf"
CONFIG_NAME = "config"
#: How the page names the config tree's folder (the package swizzlebench_conf is conf/).
CONF_LABEL = "conf"

_KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w.-]*|'[^']*'|\"[^\"]*\")\s*:(?:\s+(?P<rest>.*))?$")
_PACKAGE_LINE = re.compile(r"^#\s*@package\s+(?P<package>\S+)")


# ----------------------------------------------------------------------------- reading YAML


@dataclass
class FileComments:
    """What :func:`read_comments` finds in one YAML file."""

    header: list[str] = field(default_factory=list)       # the opening comment block, '# ' stripped
    package: str | None = None                            # a ``# @package`` directive, if any
    keys: dict[str, str] = field(default_factory=dict)    # key path (dotted) -> its comment


def _split_inline(rest: str) -> tuple[str, str]:
    """(value, comment) of the text after ``key:``; a ``#`` starts a comment only outside
    quotes and after whitespace (or at the start)."""
    quote = None
    for i, ch in enumerate(rest):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or rest[i - 1].isspace()):
            return rest[:i].rstrip(), rest[i + 1:].strip()
    return rest.rstrip(), ""


def _comment_text(line: str) -> str:
    """A comment line without its ``#`` and the one space after it (further indentation kept)."""
    text = line.strip()[1:]
    return text[1:] if text.startswith(" ") else text


def read_comments(text: str) -> FileComments:
    """The header, package directive and per-key comments of a block-style YAML text.

    A key's comment is the block of comment lines directly above it (no blank line between)
    followed by the comment on its own line.  Lines of lists (``- ...``) and block scalars
    carry no keys."""
    out = FileComments()
    stack: list[tuple[int, str]] = []      # (indent, key) of the enclosing mappings
    pending: list[str] = []
    in_header = True
    scalar_indent: int | None = None       # inside a block scalar (| or >) deeper than this
    for line in text.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if scalar_indent is not None:
            if not stripped or indent > scalar_indent:
                continue
            scalar_indent = None
        if not stripped:
            if in_header and pending:
                out.header, pending, in_header = pending, [], False
            pending = []
            continue
        if stripped.startswith("#"):
            match = _PACKAGE_LINE.match(stripped)
            if match and in_header:
                out.package = match["package"]
            else:
                pending.append(_comment_text(line))
            continue
        if in_header:
            out.header, pending, in_header = pending, [], False
        match = _KEY_LINE.match(line)
        if match is None:                  # a list item or a continuation line
            pending = []
            continue
        key = match["key"].strip("'\"")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([k for _, k in stack] + [key])
        value, inline = _split_inline(match["rest"] or "")
        comment = " ".join(part for part in (" ".join(p.strip() for p in pending), inline) if part)
        if comment:
            out.keys[path] = comment
        pending = []
        stack.append((indent, key))
        if value[:1] in ("|", ">"):
            scalar_indent = indent
    return out


# ----------------------------------------------------------------------------- the config tree


def flatten(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key path, value) of every leaf of a nested mapping; lists are leaves."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from flatten(value, f"{prefix}.{key}" if prefix else str(key))
    elif prefix:
        yield prefix, node


def _container(cfg: DictConfig) -> dict:
    """The config as plain Python, interpolations left as written (as ``--cfg job`` prints)."""
    return OmegaConf.to_container(cfg, resolve=False)


def _compose(overrides: list[str], hydra: bool = False) -> DictConfig:
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return compose(CONFIG_NAME, overrides=overrides, return_hydra_config=hydra)


@dataclass
class ConfigFile:
    """One YAML file of the tree: where its keys land in the composed config, and its comments."""

    path: Path
    label: str                 # e.g. conf/kernel/igemm.yaml
    prefix: str                # package of its keys: "" (global) or the group name
    keys: set[str]             # key paths it sets, prefixed (lists and flow mappings flattened)
    order: list[str]           # its leaf key paths in file order, prefixed
    comments: FileComments
    defaults: list[Any]        # its defaults list, if any

    @classmethod
    def load(cls, root: Path, path: Path, group: str | None) -> "ConfigFile":
        comments = read_comments(path.read_text())
        package = comments.package or (group or "")
        prefix = "" if package == "_global_" else package
        data = OmegaConf.to_container(OmegaConf.load(path), resolve=False) or {}
        defaults = data.pop("defaults", [])
        order = [_join(prefix, k) for k, _ in flatten(data)]
        keys = set(order) | {_join(prefix, k) for k in comments.keys}     # mapping nodes too
        label = f"{CONF_LABEL}/{path.relative_to(root).as_posix()}"
        return cls(path, label, prefix, keys, order, comments, defaults)

    def comment(self, key_path: str) -> str:
        """The comment written at ``key_path`` (a prefixed path), '' if none."""
        local = key_path[len(self.prefix) + 1:] if self.prefix else key_path
        return self.comments.keys.get(local, "")


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


@dataclass
class ConfigTree:
    """The groups of ``conf/``, their option files, and the primary config's defaults order."""

    root: Path
    primary: ConfigFile
    groups: dict[str, dict[str, ConfigFile]]     # group -> option -> file
    default_choice: dict[str, str]               # group -> option chosen by the defaults list

    @classmethod
    def load(cls, root: Path | None = None) -> "ConfigTree":
        if root is None:
            import swizzlebench_conf
            root = Path(swizzlebench_conf.__file__).parent
        primary = ConfigFile.load(root, root / f"{CONFIG_NAME}.yaml", None)
        choice = {k: str(v) for item in primary.defaults if isinstance(item, Mapping) for k, v in item.items()}
        folders = sorted((d for d in root.iterdir() if d.is_dir() and not d.name.startswith("_")),
                         key=lambda d: (list(choice).index(d.name) if d.name in choice else len(choice), d.name))
        groups = {d.name: {p.stem: ConfigFile.load(root, p, d.name) for p in sorted(d.glob("*.yaml"))}
                  for d in folders}           # in the defaults list's order, then the others
        return cls(root, primary, {g: o for g, o in groups.items() if o}, choice)

    def selector(self, group: str, option: str) -> str:
        """The override that picks ``option``: ``group=option``, or ``+group=option`` for a
        group the defaults list does not name."""
        return f"{group}={option}" if group in self.default_choice else f"+{group}={option}"

    def sources(self, choices: Mapping[str, str], extra: list[ConfigFile] = ()) -> list[ConfigFile]:
        """The files a composition merged, last merged (highest priority) first: ``extra``
        (appended groups such as ``+study=...``), then the defaults list in reverse."""
        order: list[ConfigFile] = []
        for item in self.primary.defaults:
            if item == "_self_":
                order.append(self.primary)
            elif isinstance(item, Mapping):
                for group in item:
                    order.append(self.groups[group][choices[group]])
        if "_self_" not in self.primary.defaults:
            order.append(self.primary)
        return [*reversed(extra), *reversed(order)]


def schema_source() -> ConfigFile:
    """The schema, source of the keys no YAML file sets (e.g. ``tune.*`` under ``tune=none``)."""
    label = "harness/schema.py (the schema's defaults: set by no YAML file)"
    return ConfigFile(Path(__file__).parents[1] / "schema.py", label, "", set(), [], FileComments(), [])


def source_of(key_path: str, sources: list[ConfigFile]) -> ConfigFile | None:
    """The highest-priority file that sets ``key_path`` (or a flow mapping or list holding it)."""
    parts = key_path.split(".")
    prefixes = [".".join(parts[:depth]) for depth in range(len(parts), 0, -1)]
    return next((source for prefix in prefixes for source in sources if prefix in source.keys), None)


# ----------------------------------------------------------------------------- Markdown


def format_value(value: Any) -> str:
    """A default as ``--cfg job`` writes it: YAML scalars, flow YAML for lists and mappings."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value) if value != "" else "''"
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 30, sort_keys=False).strip()


def code(text: str) -> str:
    """``text`` as a Markdown code span (pipes are safe inside one in a table cell)."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


_ESCAPES = {"\\": "\\\\", "|": "\\|", "*": "\\*", "_": "\\_", "<": "&lt;", ">": "&gt;", "&": "&amp;", "[": "\\["}


def prose(text: str) -> str:
    """Comment text for Markdown: characters Markdown would read as markup escaped outside
    backtick code spans, which are kept as written."""
    parts = text.split("`")
    if len(parts) % 2 == 0:             # an unpaired backtick: nothing is code
        parts = [text.replace("`", "'")]
    return "`".join(p if i % 2 else "".join(_ESCAPES.get(c, c) for c in p) for i, p in enumerate(parts))


def header_markdown(lines: list[str]) -> list[str]:
    """A file's opening comment as Markdown: prose lines joined into paragraphs, runs of
    indented lines (examples, commands) as text blocks."""
    out: list[str] = []
    prose_run: list[str] = []
    verbatim: list[str] = []

    def flush() -> None:
        if prose_run:
            out.extend([prose(" ".join(s.strip() for s in prose_run)), ""])
            prose_run.clear()
        if verbatim:
            cut = min(len(v) - len(v.lstrip()) for v in verbatim)
            out.extend(["```text", *(v[cut:] for v in verbatim), "```", ""])
            verbatim.clear()

    for line in lines:
        if line.startswith("  "):
            if prose_run:
                flush()
            verbatim.append(line)
        else:
            if verbatim:
                flush()
            prose_run.append(line)
    flush()
    return out


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines + [""]


def _record_table(records: list[Mapping]) -> list[str]:
    columns: list[str] = []
    for record in records:
        columns += [str(k) for k in record if str(k) not in columns]
    rows = [tuple(prose(format_value(r[c])) if c in r else "" for c in columns) for r in records]
    return table(tuple(code(c) for c in columns), rows)


def _key_rows(config: Mapping, source: ConfigFile, keys: list[str], summarise_records: bool
              ) -> tuple[list[tuple[str, ...]], list[tuple[str, list[Mapping]]]]:
    """Rows (key, value, comment) of ``keys`` with the comments ``source`` writes at them,
    mapping nodes with a comment first of their leaves; and the lists of records set aside."""
    rows: list[tuple[str, ...]] = []
    records: list[tuple[str, list[Mapping]]] = []
    seen: set[str] = set()
    leaves = dict(flatten(config))
    for key in keys:
        parts = key.split(".")
        for depth in range(1, len(parts)):          # commented mapping nodes above this leaf
            node = ".".join(parts[:depth])
            if node not in seen and source.comment(node):
                rows.append((code(node), "", prose(source.comment(node))))
            seen.add(node)
        value = leaves[key]
        shown = format_value(value)
        if summarise_records and isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            records.append((key, value))
            shown = f"{len(value)} {'entry' if len(value) == 1 else 'entries'}, below"
            rows.append((code(key), shown, prose(source.comment(key))))
        else:
            rows.append((code(key), code(shown), prose(source.comment(key))))
    return rows, records


def render(tree: ConfigTree | None = None) -> str:
    """The whole page, Markdown."""
    tree = tree or ConfigTree.load()
    job = _container(_compose([]))
    sources = tree.sources(tree.default_choice)
    lines = [
        "# Config reference",
        "",
        "<!-- Generated by `python -m harness.tools.config_reference > docs/reference/config.md`:"
        " do not edit by hand. -->",
        "",
        "Generated from the config tree (`conf/`, installed as the package `swizzlebench_conf`) by "
        "`python -m harness.tools.config_reference > docs/reference/config.md`; "
        "`tests/tools/test_config_reference.py` fails when this page lists a key or default that "
        "`python -m harness --cfg job` does not print, or when it is not what the generator writes now. "
        "Defaults are shown as `--cfg job` prints them: interpolations such as `${target.num_xcds}` are "
        "resolved when a job runs (`target: auto` is resolved from the device then, too). "
        "The comments are the ones written beside or above each key in its YAML file.",
        "",
        *header_markdown(tree.primary.comments.header),
        "## Config groups",
        "",
        "Every folder of `conf/` is a group; its YAML files are its options.",
        "",
    ]
    rows = []
    for group, options in tree.groups.items():
        default = tree.default_choice.get(group)
        rows.append((code(group), code(tree.selector(group, "NAME")), code(default) if default else "none",
                     ", ".join(code(o) for o in options)))
    lines += table(("group", "choose with", "default", "options"), rows)

    lines += ["## The default job config", "",
              "Every key of `python -m harness --cfg job` (no overrides), by the file that sets it; "
              "override any of them on the command line, e.g. `compare.max_time_s=1`.", ""]
    by_source: dict[str, list[str]] = {}
    files: dict[str, ConfigFile] = {}
    schema = schema_source()
    for key, _ in flatten(job):
        source = source_of(key, sources) or schema   # set by no file: the schema's default
        by_source.setdefault(source.label, []).append(key)
        files[source.label] = source
    for label, keys in by_source.items():
        lines += [f"### {code(label)}", ""]
        rows, _ = _key_rows(job, files[label], keys, summarise_records=False)
        lines += table(("key", "default", "comment"), rows)

    lines += ["## Options of each group", "",
              "What each option file sets, composed with that option selected "
              "(values as written: interpolations unresolved).", ""]
    for group, options in tree.groups.items():
        default = tree.default_choice.get(group)
        lines += [f"### {code(group)}", "",
                  f"Choose with {code(tree.selector(group, 'NAME'))}"
                  + (f"; default {code(default)}." if default else "; not in the defaults list."), ""]
        for option, file in options.items():
            lines += _option_section(tree, group, option, file)
    return "\n".join(lines).rstrip() + "\n"


def _option_section(tree: ConfigTree, group: str, option: str, file: ConfigFile) -> list[str]:
    """One option of a group: its description and the keys its file sets."""
    selector = tree.selector(group, option)
    lines = [f"#### {code(selector)}", "", f"File {code(file.label)}"
             + (" (the default)." if tree.default_choice.get(group) == option else "."), ""]
    lines += header_markdown(file.comments.header)
    extra = [] if group in tree.default_choice else [file]
    composed = _container(_compose([selector], hydra=True))
    choices = composed["hydra"]["runtime"]["choices"]
    if not extra:
        composed.pop("hydra")
    sources = tree.sources(choices, extra)
    for item in file.defaults:
        if isinstance(item, Mapping):
            for target, choice in item.items():
                name = str(target).split(" ")[-1].lstrip("/")
                lines += [f"Also selects {code(f'{name}={choice}')} ({code(str(target))} in its defaults list).", ""]
    leaves = dict(flatten(composed))
    keys = [k for k in file.order if k in leaves and source_of(k, sources) is file]
    rows, records = _key_rows(composed, file, keys, summarise_records=True)
    lines += table(("key", "value", "comment"), rows)
    for key, value in records:
        lines += [f"{code(key)}:", "", *_record_table(value)]
    return lines


if __name__ == "__main__":
    sys.stdout.write(render())
