"""Snapshot every bundled scenario's outputs, and compare two snapshots.

A refactor that must not change what a user gets is held to this: run every bundled scenario
(``twin run`` or ``twin decode``, the kind ``twin scenarios`` lists; the live ones are skipped, their
rounds are measured on a real device) at a small size with its own seed, keep its ``results.json``
and the sha256 of its per-round file (``rounds.parquet`` / ``requests.parquet``), then compare:

    python benchmarks/scenario_snapshot.py take DIR [--rounds 3000] [--shots 300]
    python benchmarks/scenario_snapshot.py compare BEFORE AFTER

``compare`` prints every scenario whose results.json differs (the dotted keys and both values)
or whose per-round file differs, and exits 1 when any does. Each scenario runs in its own
``twin`` process, as a user runs it.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PER_ROUND = ("rounds.parquet", "requests.parquet", "rounds.csv", "requests.csv")


def bundled() -> list[tuple[str, str]]:
    """(name, kind) of every bundled scenario but the live ones, from ``twin scenarios``."""
    out = subprocess.run([sys.executable, "-m", "twin", "scenarios"], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    rows = []
    for line in out.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2 and parts[1] in ("run", "decode") and not parts[0].startswith("live_"):
            rows.append((parts[0], parts[1]))
    return rows


def take(folder: Path, rounds: int, shots: int) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name, kind in bundled():
        out = folder / name
        size = ["--rounds", str(rounds)] if kind == "run" else ["--shots", str(shots)]
        cmd = [sys.executable, "-m", "twin", kind, str(ROOT / "scenarios" / f"{name}.yaml"), *size, "--no-plot",
               "--quiet", "--overwrite", "--out", str(out / "run")]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=folder)
        dt = time.perf_counter() - t0
        out.mkdir(exist_ok=True)
        (out / "stdout.txt").write_text(p.stdout + p.stderr)
        files = {}
        for f in PER_ROUND:
            if (out / "run" / f).exists():
                files[f] = hashlib.sha256((out / "run" / f).read_bytes()).hexdigest()
        (out / "per_round.json").write_text(json.dumps(files, indent=1, sort_keys=True))
        (out / "rc").write_text(str(p.returncode))
        print(f"{name:30s} {kind:6s} rc={p.returncode} {dt:6.1f} s", flush=True)
        failed += p.returncode != 0
    return failed


def _flat(x, prefix: str = "") -> dict:
    if isinstance(x, dict):
        out = {}
        for k, v in x.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(x, list):
        out = {}
        for i, v in enumerate(x):
            out.update(_flat(v, f"{prefix}[{i}]"))
        return out or {prefix: []}
    return {prefix: x}


def compare(a: Path, b: Path) -> int:
    differ = 0
    for sa in sorted(p for p in a.iterdir() if p.is_dir()):
        sb = b / sa.name
        if not sb.exists():
            print(f"{sa.name}: missing in {b}")
            differ += 1
            continue
        lines = []
        ra, rb = (sa / "rc").read_text(), (sb / "rc").read_text()
        if ra != rb:
            lines.append(f"  exit status {ra} -> {rb}")
        ja, jb = sa / "run" / "results.json", sb / "run" / "results.json"
        if ja.exists() and jb.exists():
            fa, fb = _flat(json.loads(ja.read_text())), _flat(json.loads(jb.read_text()))
            for k in sorted(set(fa) | set(fb)):
                if fa.get(k, "<absent>") != fb.get(k, "<absent>"):
                    lines.append(f"  {k}: {fa.get(k, '<absent>')!r} -> {fb.get(k, '<absent>')!r}")
        elif ja.exists() != jb.exists():
            lines.append(f"  results.json present before {ja.exists()}, after {jb.exists()}")
        pa, pb = json.loads((sa / "per_round.json").read_text()), json.loads((sb / "per_round.json").read_text())
        if pa != pb:
            lines.append(f"  per-round file {pa} -> {pb}")
        if lines:
            differ += 1
            print(f"{sa.name}: {len(lines)} difference(s)")
            print("\n".join(lines[:40]) + (f"\n  ... {len(lines) - 40} more" if len(lines) > 40 else ""))
    print(f"{differ} scenario(s) differ")
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("take", help="run every bundled scenario and keep its outputs in DIR")
    t.add_argument("dir", type=Path)
    t.add_argument("--rounds", type=int, default=3000)
    t.add_argument("--shots", type=int, default=300)
    c = sub.add_parser("compare", help="list what differs between two snapshots")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = ap.parse_args()
    if args.cmd == "take":
        return 1 if take(args.dir.resolve(), args.rounds, args.shots) else 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    raise SystemExit(main())
