"""How many workers a sweep can use: its wall time on 1, 2, ... local workers, and its task graph from a
real run list-scheduled on W = 1, 16, 64, 256 workers, as one task a point and as the driver cuts it (seeds,
shared outputs and any staged works of a point as separate tasks).

    python benchmarks/parallelism.py speedup SWEEP [SWEEP ...] [--set NAME=VALUES ...] [--workers 1,2]
    python benchmarks/parallelism.py measure [--only SWEEP ...] [--workers 2] [--out DIR]   # writes task logs
    python benchmarks/parallelism.py table [--only SWEEP ...] [--logs DIR]   # the docs/benchmarks.md table
    python benchmarks/parallelism.py from-onset-runs [--runs DIR] [--out DIR]   # the onset sweeps' task logs

`speedup` runs each sweep (the `--set` overrides apply to every one, as for `seqphase run`) from scratch into
a fresh temporary store on each worker count in turn (`harness.time_sweep`): `sweep s` is the driver's time
from the first submission to the last point stored, `total s` adds the cluster's start and the template,
`works`, `work s` and `chain s` are the run record's (the works' seconds summed, the longest chain of one
point's works), and the speed-up is the first worker count's sweep s over this one's. A one-point threshold
on 1 and 2 workers, for instance: `speedup aim-thresholds --set channel=softmax --set T=2 --set rho=0.5`.

`measure` runs each shipped sweep on a local cluster with the driver's task log (one JSON line per
stored point: the runtime of each of its works, stage by stage) into --out (default
benchmarks/out/parallelism/). Sweeps too long for a 2-core machine run on a subset of their grid, at their
full per-point settings (d, seeds, iterations): REDUCED names the subset. `table` then reads the task logs of
--logs (default benchmarks/data/parallelism/, the logs of the docs' table) and rebuilds each full sweep's
graph: the plan's N points, point i taking the works of measured point i mod m (the subset's points cycled;
the table says m of N), and list-schedules it:

    after:  a point's works of one stage are independent tasks; its next stage waits for all of them
    before: each point is one task, as long as all its works together (the serial `Method.run`)

List scheduling: tasks in plan order, each started on the first free worker as soon as it is ready.
Reported per sweep: work (CPU-s), longest chain, parallelism = work / chain, and the wall time on W
workers before and after. `from-onset-runs` writes the onset sweeps' task logs from the instance CPU times
of `python benchmarks/onset_validation.py run` (--runs, default benchmarks/data/onset/).
"""

from __future__ import annotations

import argparse
import collections
import heapq
import json
import math
import tempfile
import time
from pathlib import Path

import harness

LOGGED = harness.DATA / "parallelism"  # the task logs of the docs' table
WORKERS = (1, 16, 64, 256)

#: sweep -> --set overrides of the measured subset (per-point settings left as shipped)
REDUCED = {
    "smi-2layer-gamp": ["alpha=0.5,1.2"],
    "smi-2layer-se": ["alpha=0.1,0.5,0.9,1.3"],
    "smi-3layer-se": ["alpha=1.5"],
    "multiindex-gamp": ["channel=z1z2", "alpha=1.0,3.0"],
    "aim-gamp": ["channel=softmax", "alpha=0.1,0.5"],
    "aim-gamp-tokens": ["T=4", "alpha=0.012,0.02"],
    "aim-gamp-hardmax": ["hardmax_gout=exact", "alpha=0.5,2.0"],
    "aim-gd": ["alpha=0.075,0.225"],
    "bsr-gamp": ["rho=0.5", "alpha=0.4,0.8"],
    "bsr-gd": ["alpha=0.1,0.3"],
    "quadratic-gamp": ["delta=0.0", "alpha=0.1,0.3,0.45"],
    "quadratic-gd": ["alpha=0.1,0.308"],
    "quadratic-erm-experiment": ["kappa=2.0", "delta=0.0", "alpha=0.15,0.5"],
    "smi-sgd": [],
}


def speedup(names, overrides, workers):
    """Each sweep on each worker count in turn, into fresh stores; returns the number of failed points."""
    harness.print_machine()
    print("| sweep | --set | points | workers | sweep s | total s | works | work s | chain s | speed-up (sweep s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    failed = 0
    for name in names:
        first = None
        for count in workers:
            r = harness.time_sweep(name, overrides, count)
            first = first or r["sweep_s"]
            failed += r["failed"]
            print(f"| {name} | {' '.join(overrides)} | {r['points']} | {count} | {r['sweep_s']:.1f} | "
                  f"{r['total_s']:.1f} | {r['works']} | {r['work_s']:.1f} | {r['chain_s']:.1f} | "
                  f"{first / r['sweep_s']:.2f} |" + (f" {r['failed']} failed" if r["failed"] else ""), flush=True)
    return failed


def measure(names, workers, out):
    from seqphase.cluster import connect, run_sweep
    from seqphase.results.store import Store
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    harness.print_machine()
    with tempfile.TemporaryDirectory() as scratch, connect("local", workers=workers) as client:
        for name in names:
            plan = plan_sweep(load_sweep(name, overrides=REDUCED.get(name, [])))
            log = harness.writable(Path(out) / f"{name}.jsonl")
            log.unlink(missing_ok=True)
            store = Store(Path(scratch) / "s.zarr").check(create=True)
            started = time.perf_counter()
            with store.lock():
                group = store.prepare(plan)
                summary = run_sweep(plan, group, client, progress=False, task_log=str(log))
            print(f"{name}: {summary.done} points ({summary.failed} failed) in {time.perf_counter() - started:.1f} s "
                  f"on {workers} workers, task log {log}", flush=True)


#: onset sweeps -> the validation runs (benchmarks/onset_validation.py) whose instances they are
ONSET_RUNS = {"glm-phase-retrieval-onset": ("small.json", "large.json"),
              "multiindex-z1z2-onset": ("z1z2-small.json",)}


def from_onset_runs(runs, out):
    """Task logs of the onset sweeps from the instance CPU times of the validation runs (one process, the
    method's own works): the sweep's one point is one stage of instance tasks (the rule runs in the driver),
    each instance of its grid (size, window alpha, seed) timed by the run's instance at that size and alpha."""
    import numpy as np

    from seqphase.core.onset import parse_instance_key
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    for name, files in ONSET_RUNS.items():
        cpu = {}  # (d, alpha rounded, seed) -> CPU-s
        for file in files:
            data = json.loads((Path(runs) / file).read_text())
            s = data["settings"]
            alphas = np.linspace(s["alpha_lo"], s["alpha_hi"], s["alpha_n"])
            for key, seconds in data["cpu"].items():
                _, d, step, seed = parse_instance_key(key)
                cpu[(d, round(float(alphas[step]), 6), seed)] = seconds
        plan = plan_sweep(load_sweep(name))
        (point,) = plan.points
        settings = plan.sweep.settings
        window = np.linspace(settings["alpha_lo"], settings["alpha_hi"], settings["alpha_n"])
        stage = [cpu[(d, round(float(a), 6), k)] for d in settings["sizes"] for a in window
                 for k in range(settings["n_seeds"])]
        harness.write_json(Path(out) / f"{name}.jsonl", {"point": point.hash, "stages": [stage]})
        print(f"{name}: {len(stage)} instance tasks, {sum(stage):.0f} CPU-s")


def list_schedule(points, workers):
    """Makespan of the points' works on `workers` workers: `points` is a list of stages (lists of
    runtimes); a stage's works are ready when the point's previous stage has finished."""
    ready = collections.deque((i, 0, t) for i, stages in enumerate(points) if stages for t in stages[0])
    left = {(i, 0): len(stages[0]) for i, stages in enumerate(points) if stages}
    running, free, now = [], workers, 0.0
    while ready or running:
        while free and ready:
            i, s, t = ready.popleft()
            heapq.heappush(running, (now + t, i, s))
            free -= 1
        now, i, s = heapq.heappop(running)
        free += 1
        left[(i, s)] -= 1
        if not left[(i, s)] and s + 1 < len(points[i]):
            nxt = points[i][s + 1]
            left[(i, s + 1)] = len(nxt)
            ready.extend((i, s + 1, t) for t in nxt)
            if not nxt:  # an empty stage (all kept): the next one is ready at once
                left[(i, s + 1)] = 0
    return now


def full_graph(name, logs):
    """(points after, points before, m measured, N planned) of the shipped sweep."""
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    rows = harness.read_jsonl(Path(logs) / f"{name}.jsonl")
    measured = {row["point"]: [stage for stage in row["stages"] if stage] for row in rows}
    planned = plan_sweep(load_sweep(name)).points
    n = len(planned)
    if all(p.hash in measured for p in planned):  # the whole sweep measured: its own points, in plan order
        after = [measured[p.hash] for p in planned]
    else:  # a subset measured: its points cycled over the plan
        cycle = list(measured.values())
        after = [cycle[i % len(cycle)] for i in range(n)]
    before = [[[sum(sum(stage) for stage in stages)]] for stages in after]
    return after, before, len(measured), n


def table(names, logs):
    head = ("| sweep | measured points | tasks | work (CPU-s) | longest chain (s) | parallelism | "
            + " | ".join(f"W = {w} before / after (s)" for w in WORKERS) + " |")
    print(head)
    print("|" + "---|" * (6 + len(WORKERS)))
    for name in names:
        if not (Path(logs) / f"{name}.jsonl").exists():
            continue
        after, before, m, n = full_graph(name, logs)
        work = sum(t for stages in after for stage in stages for t in stage)
        chain = max(sum(max(stage) for stage in stages) for stages in after)
        tasks = sum(len(stage) for stages in after for stage in stages)
        walls = [f"{list_schedule(before, w):.0f} / {list_schedule(after, w):.0f}" for w in WORKERS]
        parallelism = work / chain if chain else math.inf
        print(f"| {name} | {m} of {n} | {tasks} | {work:.0f} | {chain:.1f} | {parallelism:.0f} | "
              + " | ".join(walls) + " |")


def main(argv=None):
    from seqphase.sweeps.spec import shipped_specs

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("speedup", help="wall time of sweeps on 1, 2, ... workers, and the speed-up")
    s.add_argument("sweeps", nargs="+", metavar="SWEEP", help="shipped names or spec files")
    s.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUES",
                   help="an override as for `seqphase run --set` (repeatable; applies to every sweep)")
    s.add_argument("--workers", default="1,2", help="comma-separated worker counts (default 1,2)")
    m = sub.add_parser("measure", help="task logs of the shipped sweeps")
    m.add_argument("--only", nargs="*", default=None)
    m.add_argument("--workers", type=int, default=2)
    m.add_argument("--out", type=Path, default=harness.out_path("parallelism"), help="folder of the task logs")
    t = sub.add_parser("table", help="the task logs list-scheduled on W workers")
    t.add_argument("--only", nargs="*", default=None)
    t.add_argument("--logs", type=Path, default=LOGGED, help="folder of the task logs (default: the docs' logs)")
    o = sub.add_parser("from-onset-runs", help="the onset sweeps' task logs from their validation runs")
    o.add_argument("--runs", type=Path, default=harness.DATA / "onset", help="the onset validation runs")
    o.add_argument("--out", type=Path, default=harness.out_path("parallelism"), help="folder of the task logs")
    args = parser.parse_args(argv)
    if args.command == "speedup":
        return 1 if speedup(args.sweeps, args.overrides, [int(w) for w in args.workers.split(",")]) else 0
    names = getattr(args, "only", None) or sorted(shipped_specs())
    if args.command == "from-onset-runs":
        from_onset_runs(args.runs, args.out)
    elif args.command == "measure":
        measure(names, args.workers, args.out)
    else:
        table(names, args.logs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
