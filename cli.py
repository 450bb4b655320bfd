"""The `seqphase` command: thin; each subcommand delegates to sweeps/, cluster/ and results/.

    seqphase run SWEEP [--set NAME=V1,V2,... | NAME=start:stop:num]... [--store PATH]
                       [--cluster local|ADDRESS] [--workers N] [--name NAME] [--retries N]
    seqphase list
    seqphase status SWEEP [--store PATH]
    seqphase query SWEEP [--format csv|json] [--all] [--store PATH] [-o FILE]
    seqphase plot SWEEP -o FILE.png [--store PATH]
    seqphase retry-failed SWEEP [--store PATH] [--cluster ...] [--workers N]

Bad input (unknown sweep, model or parameter, a value out of range, a malformed spec, a foreign or
corrupted store) prints one line naming the field and the fix, exits with code 2 and writes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from seqphase.core.errors import SeqphaseError

EXIT_BAD_INPUT = 2
EXIT_FAILED_POINTS = 1


def build_parser():
    parser = argparse.ArgumentParser(prog="seqphase", description="Phase-diagram sweeps: SE, GAMP, thresholds.")
    sub = parser.add_subparsers(dest="command", required=True)

    def add_store(p):
        p.add_argument("--store", default=None, help="zarr store (default ./results/seqphase.zarr)")

    def add_cluster(p):
        p.add_argument("--cluster", default="local", help="`local` (embedded Dask cluster) or a scheduler address")
        p.add_argument("--workers", type=int, default=None, help="local workers (default: one per core)")
        p.add_argument("--retries", type=int, default=2, help="retries of a point that raises (default 2)")
        p.add_argument("--no-progress", action="store_true", help="no progress line")

    run = sub.add_parser("run", help="run a sweep (resumes: only points not done are computed)")
    run.add_argument("sweep", help="shipped sweep name (seqphase list) or path to a .toml spec")
    run.add_argument("--set", action="append", default=[], metavar="NAME=VALUES",
                     help="override a parameter (V1,V2,... or start:stop:num) or a method setting")
    run.add_argument("--name", default=None, help="store under this sweep name instead of the spec's")
    add_store(run)
    add_cluster(run)

    sub.add_parser("list", help="list the shipped sweeps")

    status = sub.add_parser("status", help="points done / failed / pending, and the runs so far")
    status.add_argument("sweep")
    add_store(status)

    query = sub.add_parser("query", help="print stored results as a table")
    query.add_argument("sweep")
    query.add_argument("--format", choices=("csv", "json"), default="csv")
    query.add_argument("--all", action="store_true", help="also rows of points not done")
    query.add_argument("-o", "--output", default=None, help="write to a file instead of stdout")
    add_store(query)

    plot = sub.add_parser("plot", help="draw the sweep's figure as PNG")
    plot.add_argument("sweep")
    plot.add_argument("-o", "--output", required=True, help="PNG file to write")
    add_store(plot)

    retry = sub.add_parser("retry-failed", help="rerun only the points recorded as failed")
    retry.add_argument("sweep")
    add_store(retry)
    add_cluster(retry)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except SeqphaseError as exc:
        print(f"seqphase: error: {exc.one_line()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("seqphase: interrupted; points already stored are kept, rerun to resume", file=sys.stderr)
        return 130


def cmd_run(args):
    from seqphase.sweeps.spec import load_sweep

    sweep = load_sweep(args.sweep, overrides=args.set, rename=args.name)
    return _execute(sweep, args, mode="resume")


def cmd_retry_failed(args):
    from seqphase.results.query import sweep_name
    from seqphase.results.store import Store
    from seqphase.sweeps.spec import sweep_from_resolved

    group = Store(args.store).open_sweep(sweep_name(args.sweep))
    sweep = sweep_from_resolved(json.loads(group.attrs["spec_resolved"]), text=group.attrs.get("spec", ""))
    return _execute(sweep, args, mode="retry-failed")


def _execute(sweep, args, mode):
    from seqphase.cluster import connect, run_sweep
    from seqphase.results.store import Store
    from seqphase.sweeps.planner import plan_sweep

    if args.workers is not None and args.workers < 1:
        raise SeqphaseError("--workers", f"{args.workers} is not a positive number", "use --workers 1 or more")
    if args.retries < 0:
        raise SeqphaseError("--retries", "must be >= 0")
    plan = plan_sweep(sweep)
    store = Store(args.store)
    store.check(allow_missing=True)  # refuse a foreign or corrupted store before starting anything
    # Connect before touching the store: an unreachable cluster must leave it as it was.
    with connect(args.cluster, args.workers) as client:
        store.check(create=True)
        with store.lock():
            group = store.prepare(plan)
            print(f"seqphase: {mode} {sweep.name}: {len(plan.points)} points "
                  f"({sweep.model}/{sweep.method}) -> {store.path}/{sweep.name}", file=sys.stderr)
            summary = run_sweep(plan, group, client, mode=mode, retries=args.retries,
                                progress=not args.no_progress)
    print(f"seqphase: {summary.line()}", file=sys.stderr)
    return EXIT_FAILED_POINTS if summary.failed else 0


def cmd_list(args):
    from seqphase.sweeps.spec import load_sweep, shipped_specs

    for name in sorted(shipped_specs()):
        sweep = load_sweep(name)
        size = 1
        for values in sweep.params.values():
            size *= len(values)
        print(f"{name:40s} {sweep.model}/{sweep.method:10s} {size:5d} points  {sweep.title}")
    return 0


def cmd_status(args):
    from seqphase.results.query import sweep_name
    from seqphase.results.store import STATUS_NAMES, Store

    group = Store(args.store).open_sweep(sweep_name(args.sweep))
    status, _ = group.ledger()
    counts = Counter(int(s) for s in status.ravel())
    requested = status.size - counts.get(0, 0)
    print(f"sweep {group.name} ({group.attrs['model']}/{group.attrs['method']}) in {group.store.path}")
    print(f"  grid: " + " x ".join(f"{d}[{len(group.coords[d])}]" for d in group.dims))
    print("  points: " + ", ".join(f"{counts.get(code, 0)} {STATUS_NAMES[code]}" for code in (2, 3, 1))
          + f" (of {requested} requested)")
    errors = group.group["error"][...]
    for index in zip(*(status == 3).nonzero()):
        params = group.cell_params(tuple(int(i) for i in index))
        print(f"  failed {params}: {errors[index]}")
    for run in group.attrs.get("runs", []):
        job = f" slurm job {run['slurm_job_id']}" if run.get("slurm_job_id") else ""
        print(f"  run {run.get('started_at')} {run.get('mode')} on {run.get('host')}{job}: "
              f"{run.get('submitted')} submitted, {run.get('done', '?')} done, {run.get('failed', '?')} failed, "
              f"{run.get('outcome', 'running or killed')}")
    return 0


def cmd_query(args):
    from seqphase.results.query import frame_to_json, open_results, to_frame

    ds = open_results(args.sweep, args.store)
    frame = to_frame(ds, include_all=args.all)
    text = frame.to_csv(index=False) if args.format == "csv" else frame_to_json(frame, ds) + "\n"
    if args.output:
        with open(args.output, "w") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_plot(args):
    from seqphase.results.plot import plot_sweep
    from seqphase.results.query import open_results

    if not args.output.lower().endswith(".png"):
        raise SeqphaseError("-o", f"{args.output!r} is not a .png file", "write e.g. -o figure.png")
    ds = open_results(args.sweep, args.store)
    plot_sweep(ds, args.output)
    print(f"seqphase: wrote {args.output}", file=sys.stderr)
    return 0


COMMANDS = {"run": cmd_run, "list": cmd_list, "status": cmd_status, "query": cmd_query, "plot": cmd_plot,
            "retry-failed": cmd_retry_failed}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
