"""``twin machine [SCENARIO]``: a machine of many logical qubits (patches, program, decoder pools)."""
from __future__ import annotations

import argparse

from twin.commands.common import (
    _count,
    _file_name,
    _seed,
    add_figure_format,
    add_overwrite,
    check_out_folder,
    run_folder,
    scenario_arg,
)
from twin.usage import UsageError

DEFAULT_MACHINE = "scenarios/machine_100q.yaml"


def _counts(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected decoder counts like 4,8,16, got {text[:40]!r}") from None
    if not out or any(k < 1 or k > 100_000 for k in out) or len(out) > 64:
        raise argparse.ArgumentTypeError(f"expected 1 to 64 decoder counts 1..100000, got {text[:40]!r}")
    return out


def register(sub) -> None:
    """Add ``machine`` to the ``twin`` subcommands."""
    d = sub.add_parser("machine", help=f"run a machine study: many logical qubits, decoder pools (default: "
                                        f"{DEFAULT_MACHINE})")
    d.add_argument("scenario", nargs="?", type=_file_name,
                   help=f"machine scenario YAML, or a bundled one's name (default {DEFAULT_MACHINE})")
    d.add_argument("--cycles", type=_count, help="QEC cycles (default: the scenario's)")
    d.add_argument("--seed", type=_seed, help="seed >= 0 (default: the scenario's)")
    d.add_argument("--decoders", type=_counts, help="also run every pool at each of these decoder counts "
                   "(e.g. 4,8,16): the logical clock against the decoder count")
    d.add_argument("--out", help="output folder (default runs/<scenario name>)")
    d.add_argument("--no-plot", action="store_true", help="do not write the machine figure (machine.png, or "
                   "machine.pdf / machine.svg with --figure-format)")
    d.add_argument("--quiet", action="store_true", help="no progress bar")
    from twin.commands.machine_parts import add_parted_options
    add_parted_options(d)
    add_figure_format(d, "machine")
    add_overwrite(d)
    d.set_defaults(handler=cmd_machine)


def cmd_machine(args: argparse.Namespace, console) -> int:
    """Run a machine scenario: its table, results.json and machine.png. Returns 0, or 3 when a part of
    a partitioned run (``--processes`` / ``--cluster``) was lost (the others' pools saved, partial)."""
    from pathlib import Path

    from twin.commands import machine_parts as mp
    from twin.machine.report import MACHINE_FILES, machine_figure, print_machine
    from twin.machine.study import check_run, load_machine, pool_specs, run_machine, sweep_decoders
    from twin.output.progress import progress_bar
    mp.check_options(args)
    lm = load_machine(scenario_arg(args.scenario, DEFAULT_MACHINE))
    short = None if args.cycles is None else lm.sc.machine.too_short(args.cycles)
    if short:
        raise UsageError(f"--cycles {args.cycles}: {short}")
    check_run(lm, args.cycles, sweeping=bool(args.decoders))  # the cycles' bound, the memory the run needs
    if args.decoders:
        try:
            for k in args.decoders:
                pool_specs(lm.sc.machine, k)
        except ValueError as e:
            raise UsageError(str(e)) from None
    out = check_out_folder(args.out or Path("runs") / lm.sc.name)
    seed = lm.sc.seed if args.seed is None else args.seed
    names = [MACHINE_FILES[0], *([] if args.no_plot else [MACHINE_FILES[1]]),
             *(["stats.csv"] if lm.sc.machine.ler is not None else [])]
    folder = run_folder(args, out, seed).check(names)
    from twin.commands.parted_args import parted as is_parted
    with folder, progress_bar(console, quiet=args.quiet) as bar:
        task = bar.add_task("machine", total=None)
        kept: list = []
        step = lambda done, n: bar.update(task, completed=done, total=n)  # noqa: E731
        parted = mp.runner(args, console, lambda text: bar.update(task, description=text), step, out, kept) \
            if is_parted(args) else None
        model, doc = run_machine(lm, cycles=args.cycles, seed=args.seed, progress=step, parted=parted)
        sweep = None
        if args.decoders:
            tasks: dict = {}

            def prog(k, done, n):
                if k not in tasks:
                    tasks[k] = bar.add_task(f"K={k}", total=n)
                bar.update(tasks[k], completed=done)
            sweep = sweep_decoders(lm, args.decoders, cycles=args.cycles, seed=args.seed, progress=prog)
            doc["sweep"] = sweep
        bar.stop()
        print_machine(doc, console, sweep)
        code = mp.finish(kept, doc, folder, console)
        folder.write_json("results.json", doc, default=float)
        if lm.sc.machine.ler is not None:  # the decoded sample in sinter's CSV: `sinter plot --in stats.csv`
            import sinter
            folder.write("stats.csv", sinter.CSV_HEADER + "\n" + "".join(t.to_csv_line() + "\n"
                                                                         for t in model.ler_stats))
        if not args.no_plot:
            folder.savefig("machine.png", machine_figure(model, doc, sweep))
        paths = folder.commit()
    console.print("wrote " + ", ".join(str(p) for p in paths), highlight=False)
    return code
