"""The shm "fast state": whole ``twin run``s whose live shm consumer served at about 200 ns instead of
450-900 ns (issue 26 item 4). Counts it in every committed H200-host shm run (stored data only, no device):

1. per run (a ``twin run`` folder, or one pass of a point measured in passes): its service p50 (ns,
   request written -> reply seen, the producer's CLOCK_MONOTONIC); a run is in the fast state when
   its p50 is under :data:`FAST_NS`; and per block of :data:`BLOCK` rounds, how many blocks are
   (does the state start or end inside a run?);
2. where the run has the consumer's own stamps (the paced loop: ``device_in_ns``, ``device_out_ns``,
   the same clock), the service split into its three legs, p50 each: notice (written -> the consumer
   saw it landed), serve (seen -> reply published) and hand-back (published -> the producer saw it).

Usage: PYTHONPATH=. python benchmarks/shm_fast_state.py [FOLDER ...]  (default: every h200_host_shm* folder and
every C-paced folder with an shm.npz under calibrations/measured/live/)
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

LIVE = Path(__file__).resolve().parent.parent / "calibrations" / "measured" / "live"
FAST_NS = 300.0  # a run whose service p50 is under this is in the fast state (normal: 420-900 ns, fast: 170-215)
BLOCK = 500  # rounds per block of the within-run check


def runs(folder: Path):
    """Every live run folder (one ``live_rounds.npz``) under ``folder``: (name, npz path)."""
    for npz in sorted(folder.rglob("live_rounds.npz")):
        yield str(npz.parent.relative_to(folder.parent)), npz


def legs(z, node: str, svc: np.ndarray) -> tuple[float, float, float] | None:
    """(notice, serve, hand-back) p50s (ns) from the consumer's stamps, or None without them."""
    need = [f"{node}.{k}" for k in ("device_in_ns", "device_out_ns", "planned_ns", "lateness_ps")]
    if not all(k in z.files for k in need):
        return None
    din, dout, plan, late = (z[k].astype(np.int64) for k in need)
    sent = plan + late // 1000
    ok = (din > 0) & (dout >= din)
    if ok.sum() < 100:
        return None
    notice, serve = din[ok] - sent[ok], dout[ok] - din[ok]
    back = svc[ok] - (dout[ok] - sent[ok])
    return tuple(float(np.median(x)) for x in (notice, serve, back))


def batch_rows(folder: Path) -> list[dict]:
    """A C-paced folder's (``benchmarks/duty_cycle.py``: ``shm.npz``) rows, one per point and pass."""
    from twin.fitting.idle_priors import source_points
    out = []
    for point, p in source_points(folder, "shm").items():
        idx = p.get("pass_index", np.zeros(len(p["service_ns"]), np.int64))
        for k in np.unique(idx):
            svc = p["service_ns"][idx == k].astype(np.int64)
            blocks = [float(np.median(svc[i:i + BLOCK])) for i in range(0, len(svc) - BLOCK + 1, BLOCK)] or \
                [float(np.median(svc))]
            out.append({"run": f"{folder.name}/{point}/pass_{int(k):02d}", "rounds": len(svc),
                        "p50": float(np.median(svc)), "fast_blocks": sum(b < FAST_NS for b in blocks),
                        "blocks": len(blocks), "legs": None})
    return out


def scan(folders: list[Path]) -> list[dict]:
    """One row per run (module docstring)."""
    out = []
    for folder in folders:
        if (folder / "shm.npz").is_file():
            out += batch_rows(folder)
            continue
        for name, npz in runs(folder):
            with np.load(npz) as z:
                node = next((k.split(".")[0] for k in z.files if k.endswith(".service_ns")), None)
                if node is None or not node.startswith("cpu"):
                    continue
                svc = z[f"{node}.service_ns"].astype(np.int64)
                if len(svc) < BLOCK:
                    continue
                blocks = [float(np.median(svc[i:i + BLOCK])) for i in range(0, len(svc) - BLOCK + 1, BLOCK)]
                out.append({"run": name, "rounds": len(svc), "p50": float(np.median(svc)),
                            "fast_blocks": sum(b < FAST_NS for b in blocks), "blocks": len(blocks),
                            "legs": legs(z, node, svc)})
    return out


def main(argv: list[str]) -> int:
    folders = [Path(a) for a in argv] or sorted(p for p in LIVE.iterdir() if p.is_dir() and (
        p.name.startswith("h200_host_shm") or (p / "shm.npz").is_file()))
    missing = [f for f in folders if not f.is_dir()]
    if missing:
        print(f"shm_fast_state.py: {missing[0]}: no such folder", file=sys.stderr)
        return 2
    rows = scan(folders)
    fast = [r for r in rows if r["p50"] < FAST_NS]
    mixed = [r for r in rows if 0 < r["fast_blocks"] < r["blocks"]]
    print(f"{len(rows)} shm runs (passes counted one by one) in {len(folders)} folders; fast state "
          f"(service p50 < {FAST_NS:.0f} ns): {len(fast)} runs")
    for r in fast:
        print(f"  {r['run']}: p50 {r['p50']:.0f} ns, {r['fast_blocks']}/{r['blocks']} blocks of {BLOCK} fast"
              + ("" if r["legs"] else " (no consumer stamps)"))
    print(f"runs with some but not all blocks fast: {len(mixed)}")
    for r in mixed:
        print(f"  {r['run']}: p50 {r['p50']:.0f} ns, {r['fast_blocks']}/{r['blocks']} blocks fast")
    by_folder: dict[str, list[dict]] = {}
    for r in rows:
        by_folder.setdefault(r["run"].split("/")[0], []).append(r)
    print("per folder: runs, fast runs, service p50 range of the others (ns)")
    for f, rs in by_folder.items():
        slow = [r["p50"] for r in rs if r["p50"] >= FAST_NS]
        rng = f"{min(slow):.0f}..{max(slow):.0f}" if slow else "-"
        print(f"  {f}: {len(rs)}, {sum(r['p50'] < FAST_NS for r in rs)}, {rng}")
    stamped = [r for r in rows if r["legs"]]
    if stamped:
        print("service legs where stamped (p50 ns: notice / serve / hand-back), lowest 3 and median run by service:")
        srt = sorted(stamped, key=lambda r: r["p50"])
        for r in srt[:3] + [srt[len(srt) // 2]]:
            n, s, b = r["legs"]
            print(f"  {r['run']}: service {r['p50']:.0f} = {n:.0f} / {s:.0f} / {b:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
