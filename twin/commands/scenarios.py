"""``twin scenarios``: list the bundled studies; ``twin scenarios copy NAME [DEST]``: copy one into
your folder to edit.

A copy keeps the scenario's text (comments included) and rewrites only its data paths
(``calibration:``, ``hosting:``, ``measured:``, relative to the bundled file) to the bundled files'
names, ``bundled:calibrations/fitted/card_path.yaml`` (:func:`twin.config.named_file` finds them in a
checkout or an installed wheel), so it runs from any folder and its results.json records that name,
not where the twin is installed; a decode scenario without ``hosting:`` gets the bundled hosting
costs the same way. Code the scenario names that you would edit — a ``decode.function``
module or ``rtl.sources`` found beside the bundled scenario — is copied along, at the same path
relative to the copy. Nothing is overwritten: an existing file is refused (one line, exit 2).
"""
from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from twin.bundled import bundled_path, bundled_root, scenario_files
from twin.commands.common import UsageError, check_out_folder

if TYPE_CHECKING:
    from rich.console import Console

DATA_KEYS = ("calibration", "hosting", "measured")
_TOP_KEY = re.compile(r"^(?P<key>calibration|hosting|measured):(?P<sp>[ \t]*)(?P<value>[^#\n]*?)"
                      r"(?P<tail>[ \t]+#[^\n]*)?[ \t]*$", re.M)


def register(sub) -> None:
    """Add ``scenarios`` (``list``, ``copy``) to the ``twin`` subcommands."""
    s = sub.add_parser("scenarios", help="list the bundled scenarios; `twin scenarios copy NAME` copies one to edit",
                       description="List the bundled scenarios, or copy one into your folder to edit. A copy's "
                                   "calibration/hosting/measured paths name the bundled files "
                                   "(bundled:calibrations/...); a decoder module it names is copied along.")
    s.set_defaults(handler=cmd_scenarios, action="list")
    ss = s.add_subparsers(dest="action")
    ss.add_parser("list", help="list the bundled scenarios (the default)")
    c = ss.add_parser("copy", help="copy a bundled scenario into your folder (refuses to overwrite)")
    c.add_argument("name", help="a bundled scenario's name (see `twin scenarios`), e.g. card_path_64b")
    c.add_argument("dest", nargs="?", help="a .yaml (or .yml) file to write, or else a folder (made if need be) to "
                                           "write NAME.yaml in (default ./NAME.yaml)")


def scenario_kind(doc: dict) -> str:
    """A scenario's study: ``machine`` (a ``machine:`` section), ``decode`` (``decode:``), else ``run``."""
    return "machine" if "machine" in doc else "decode" if "decode" in doc else "run"


def describe(path: Path) -> tuple[str, str, str]:
    """(name, kind ``run``, ``decode`` or ``machine``, one-line description) of a scenario file."""
    import yaml

    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        return path.stem, "?", f"(cannot read it: {' '.join(str(e).split())[:80]})"
    if not isinstance(doc, dict):
        return path.stem, "?", "(not a mapping)"
    kind = scenario_kind(doc)
    return path.stem, kind, " ".join(str(doc.get("description") or "").split())


def cmd_scenarios(args: argparse.Namespace, console: Console) -> int:
    """List (the default) or copy. Returns 0; raises :class:`UsageError` for an unknown name or a
    destination that exists."""
    if getattr(args, "action", None) == "copy":
        return cmd_copy(args, console)
    rows = [describe(p) for p in scenario_files()]
    width = max((len(n) for n, _, _ in rows), default=4)
    print(f"{'name':<{width}}  {'kind':<7}  description")
    for name, kind, text in rows:
        print(f"{name:<{width}}  {kind:<7}  {text}")
    print(f"\n{len(rows)} scenarios in {bundled_path('scenarios')}. Copy one here to edit: "
          "`twin scenarios copy NAME [DEST]`, then `twin run NAME.yaml` (kind decode: `twin decode NAME.yaml`, "
          "machine: `twin machine NAME.yaml`).")
    return 0


def _quote(text: str) -> str:
    """``text`` as a YAML scalar: plain when that reads back the same, else double-quoted."""
    import yaml

    try:
        if yaml.safe_load(text) == text and not text.startswith(("'", '"')):
            return text
    except yaml.YAMLError:
        pass
    return json.dumps(text)


def rewrite_paths(text: str, src: Path) -> str:
    """``text`` (the scenario ``src``) with its top-level data paths resolved against ``src``'s folder
    and named ``bundled:REL`` (:func:`bundled_name`); ``null`` and absent keys stay. Comments and
    everything else are kept."""
    import yaml

    def sub(m: re.Match) -> str:
        raw = m["value"].strip()
        value = yaml.safe_load(raw) if raw else None
        if not isinstance(value, str) or not value:
            return m[0]
        absolute = (src.parent / value).resolve() if not Path(value).is_absolute() else Path(value)
        return f"{m['key']}:{m['sp'] or ' '}{_quote(bundled_name(absolute))}{m['tail'] or ''}"
    return _TOP_KEY.sub(sub, text)


def bundled_name(path: Path) -> str:
    """``bundled:REL`` for a file inside the bundled files (REL its path in the repository, e.g.
    ``bundled:calibrations/fitted/card_path.yaml``: it resolves in any checkout or install, and a run's
    results.json records it as written, not the install's location), else ``path`` whole."""
    from twin.config.load import BUNDLED
    root = bundled_root().resolve()
    try:
        return BUNDLED + path.resolve().relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _along(doc: dict, src: Path) -> list[tuple[Path, Path]]:
    """Files the scenario names as code to edit, found beside the bundled file: (source, path
    relative to the copy's folder). A ``decode.function`` module is looked for where the loader looks
    (the scenario's folder, then its parent); ``decode.circuit`` and ``rtl.sources`` are relative to
    the scenario."""
    out: list[tuple[Path, Path]] = []
    decode = doc.get("decode") if isinstance(doc.get("decode"), dict) else {}
    fn = decode.get("function")
    if isinstance(fn, str) and ":" in fn:
        parts = fn.split(":")[0].split(".")
        for root in (src.parent, src.parent.parent):
            f = root.joinpath(*parts).with_suffix(".py")
            if f.is_file():
                out.append((f, Path(*parts).with_suffix(".py")))
                break
    circ = decode.get("circuit")  # a decode.circuit file (relative to the scenario) travels with it
    if isinstance(circ, str) and not Path(circ).is_absolute() and ".." not in Path(circ).parts \
            and (src.parent / circ).is_file():
        out.append((src.parent / circ, Path(circ)))
    for node in doc.get("nodes") or []:
        rtl = node.get("rtl") if isinstance(node, dict) else None
        for s in (rtl or {}).get("sources") or [] if isinstance(rtl, dict) else []:
            rel = Path(str(s))
            if not rel.is_absolute() and ".." not in rel.parts and (src.parent / rel).is_file():
                out.append((src.parent / rel, rel))
    return out


def cmd_copy(args: argparse.Namespace, console: Console) -> int:
    """``twin scenarios copy NAME [DEST]``: write the copy (and what it needs) or refuse, before
    writing anything, when a file is in the way."""
    import yaml

    name = args.name[:-5] if args.name.endswith(".yaml") else args.name
    src = bundled_path("scenarios") / f"{name}.yaml"
    if "/" in name or not src.is_file():
        known = ", ".join(p.stem for p in scenario_files())
        raise UsageError(f"scenarios copy {args.name}: no bundled scenario of that name (there are: {known})")
    dest = Path(args.dest) if args.dest else Path(f"{name}.yaml")
    if dest.is_dir() or (args.dest or "").endswith(("/", os.sep)) or dest.suffix not in (".yaml", ".yml"):
        if dest.exists() and not dest.is_dir():  # a DEST without .yaml names a folder: a file there is in the way
            raise UsageError(f"scenarios copy: {dest} is a file, not a folder: name a NAME.yaml file or a folder")
        dest = dest / f"{name}.yaml"  # a folder (made if need be)
    check_out_folder(dest.parent, option="DEST", shown=args.dest or dest)
    text = src.read_text()
    doc = yaml.safe_load(text)
    new = rewrite_paths(text, src)
    if "decode" in doc and "hosting" not in doc:  # the loader's default is relative to the scenario
        hosting = _quote(bundled_name(bundled_path("calibrations/hosting.yaml")))
        new = re.sub(r"^(calibration:[^\n]*\n)", lambda m: m[1] + f"hosting: {hosting}\n", new, count=1, flags=re.M)
    along = [(f, dest.parent / rel) for f, rel in _along(doc, src)]
    for target in [dest, *(t for _, t in along)]:
        if target.exists() or target.is_symlink():
            raise UsageError(f"scenarios copy: {target} exists; not overwriting it (remove it or name another DEST)")
    from twin.output.files import write_file
    write_file(dest, new)  # each whole or not at all (twin.output.files)
    for f, target in along:
        write_file(target, f.read_bytes())
    kind = scenario_kind(doc)
    from twin.config.trust import announce, named_code
    announce(dest, named_code(doc, dest))  # what the copy will run, as `twin run`/`decode` will say it
    console.print(f"wrote {dest}" + "".join(f", {t}" for _, t in along)
                  + f" (its calibration files are the bundled ones, named bundled:...); run it: twin {kind} {dest}")
    return 0
