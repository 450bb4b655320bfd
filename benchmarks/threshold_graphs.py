"""Threshold points as graphs of tasks against the sequential bisections: the values, and the wall of a
point on 1 worker (serial) against the longest chain of its graph.

    # old code importable as `seqphase` (e.g. a checkout of the commit before, installed in another venv):
    python benchmarks/threshold_graphs.py run --out /tmp/old.jsonl [--only SWEEP ...] [--set NAME=VALUES ...]
    # new code:
    python benchmarks/threshold_graphs.py run --out /tmp/new.jsonl [--only SWEEP ...] [--set NAME=VALUES ...]
    python benchmarks/threshold_graphs.py compare /tmp/old.jsonl /tmp/new.jsonl    # the docs tables

`run` computes every point of the threshold sweeps (`--only`; default: the shipped threshold sweeps of glm,
multiindex and quadratic-erm, SWEEPS) in this process (`Model.run`), with the `--set` overrides applied to each
as for `seqphase run`, and appends one JSON line a point to --out (default
benchmarks/out/threshold_graphs/points.jsonl): the values, the CPU time (time.process_time) and, for a
method with a task graph, the chain: the sum over the graph's rounds of the longest work of the round
(CPU time of each work run serially), i.e. the point's wall on as many workers as a round has works.
`--task-log DIR` also writes each sweep's graph in the task-log format of benchmarks/parallelism.py
(`table --logs DIR` list-schedules it), with CPU times: on a loaded machine the driver's task log (wall
times) inflates every work by the load.
`compare` prints, value by value, old, new, the relative difference and the search's stated error.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

import harness

SWEEPS = ["glm-cs-thresholds", "glm-phase-retrieval-thresholds", "glm-binary-perceptron-thresholds",
          "multiindex-thresholds", "multiindex-norm2-thresholds", "quadratic-erm-thresholds"]


def _timed_drive(tasks):
    """Drive a task generator serially, timing every work (CPU time): (outputs, stages), stages the CPU
    seconds of each work, round by round (what the driver's task log records, as wall times)."""
    stages = []
    try:
        works = next(tasks)
        while True:
            results, times = {}, []
            for work in works:
                t0 = time.process_time()
                results[work.key] = work.fn(**work.kwargs)
                times.append(time.process_time() - t0)
            stages.append(times)
            works = tasks.send(results)
    except StopIteration as stop:
        return stop.value, stages


def run(out, only, task_log=None, overrides=()):
    from seqphase.core.models import get_model, point_stream
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    harness.writable(out)  # refused before the run, not after it
    harness.print_machine()
    for name in only or SWEEPS:
        plan = plan_sweep(load_sweep(name, overrides=list(overrides)))
        log = Path(task_log) / f"{name}.jsonl" if task_log else None
        if log:
            harness.write_text(log, "")
        model = get_model(plan.sweep.model)
        for point in plan.points:
            params, settings = plan.point_inputs(point)
            stream = point_stream(plan.sweep.seed, point.seed_key)
            t0 = time.process_time()
            gen = model.tasks(plan.sweep.method, params, settings, stream) if hasattr(model, "tasks") else None
            if gen is not None:
                values, stages = _timed_drive(gen)
            else:
                values = model.run(plan.sweep.method, params, settings, stream)
                stages = [[time.process_time() - t0]]
            cpu = sum(map(sum, stages))
            chain, n_works, rounds = sum(map(max, stages)), sum(map(len, stages)), len(stages)
            row = {"sweep": name, "params": {k: v for k, v in params.items()}, "values": flat(values),
                   "cpu_s": cpu, "chain_s": chain, "works": n_works, "rounds": rounds,
                   "load": os.getloadavg()[0], "settings": {k: settings[k] for k in ("rtol", "k", "it_rtol") if k in settings},
                   "stages": stages}
            harness.append_jsonl(out, [row])  # one JSON line a point, as it is computed
            if log:  # the point's graph in benchmarks/parallelism.py's task-log format, CPU times
                harness.append_jsonl(log, [{"point": point.hash, "stages": stages}])
            print(json.dumps(row), flush=True)


def flat(values):
    """{name: float} of a point's outputs, arrays flattened to name[i] (strings kept as they are)."""
    out = {}
    for name, value in values.items():
        if isinstance(value, str):
            out[name] = value
            continue
        array = np.asarray(value, dtype=float)
        if array.ndim == 0:
            out[name] = float(array)
        else:
            for index, v in np.ndenumerate(array):
                out[f"{name}[{','.join(map(str, index))}]"] = float(v)
    return out


def _labeller(rows):
    """A point's label: the parameters that vary within its sweep."""
    values = collections.defaultdict(set)
    for row in rows:
        for key, value in row["params"].items():
            values[(row["sweep"], key)].add(json.dumps(value))

    def label(row):
        return ", ".join(f"{k}={v}" for k, v in row["params"].items() if len(values[(row["sweep"], k)]) > 1)
    return label


def compare(old_path, new_path, bound_of):
    """Print the value table (every search value of every point, and any other value that changed) and
    the cost table; returns the number of values outside their bound."""
    old = [json.loads(line) for line in open(old_path) if line.startswith("{")]
    new = [json.loads(line) for line in open(new_path) if line.startswith("{")]
    index = {(r["sweep"], json.dumps(r["params"], sort_keys=True)): r for r in old}
    _label = _labeller(new)
    print("| sweep | point | value | old (sequential) | new (graph) | rel. diff | bound: rtol | within |")
    print("|---|---|---|---|---|---|---|---|")
    counts = collections.Counter()
    for row in new:
        before = index[(row["sweep"], json.dumps(row["params"], sort_keys=True))]
        for name, value in row["values"].items():
            a = before["values"].get(name)
            if isinstance(value, str) or a is None or name.startswith("projector"):
                counts["not compared (strings, projectors)"] += 1
                continue
            same = a == value or (math.isnan(a) and math.isnan(value))
            rel = 0.0 if same else abs(a - value) / max(abs(a), abs(value), 1e-300)
            rtol = bound_of(row["sweep"], name, row)
            if rtol == "derived":
                counts["derived (relative gaps)" + (", identical" if same else ", changed with their search value")] += 1
                continue
            if rtol is None and same:
                counts["not a search, identical"] += 1
                continue
            if same and math.isnan(a):
                counts["search values NaN in both (not computed, padding)"] += 1
                continue
            within = rtol is not None and (same or rel <= rtol * (1 + rtol))
            counts["search values within the bound" if within else "OUTSIDE THE BOUND"] += 1
            print(f"| {row['sweep']} | {_label(row)} | {name} | {a:.10g} | {value:.10g} | "
                  f"{'identical' if same else f'{rel:.2e}'} | {'-' if rtol is None else f'{rtol:g}'} | "
                  f"{'yes' if within else 'NO'} |")
    print()
    print("; ".join(f"{what}: {n}" for what, n in sorted(counts.items())))
    print()
    print("| sweep | point | 1 worker: old / new (CPU-s) | longest chain (CPU-s) | works / rounds | load old / new |")
    print("|---|---|---|---|---|---|")
    for row in new:
        before = index[(row["sweep"], json.dumps(row["params"], sort_keys=True))]
        print(f"| {row['sweep']} | {_label(row)} | {before['cpu_s']:.1f} / {row['cpu_s']:.1f} | "
              f"{row['chain_s']:.2f} | {row['works']} / {row['rounds']} | {before['load']:.1f} / {row['load']:.1f} |")
    return counts["OUTSIDE THE BOUND"]


def bound_of(sweep, name, row):
    """The relative error bound of a value against version 1's (core/search.py): the rtol of the search
    that gave it; None for a value no search gives (it must be identical), "derived" for relative gaps."""
    rtol = row["settings"].get("rtol")
    if name.endswith("gap") or name.startswith("relative_gap"):
        return "derived"
    if sweep.startswith("glm"):
        return {"alpha_bisection": rtol, "alpha_it": row["settings"].get("it_rtol", 1e-5)}.get(name)
    if sweep.startswith("quadratic-erm"):
        return rtol if name in ("alpha_interp_bisection", "alpha_sr_bisection") else None
    if name.startswith("alpha_bisection") or (row["params"].get("channel") == "staircase"
                                              and name in ("alpha_stability[1]", "alpha_stability[2]")):
        # the staircase's m1 jump (stage 2, and stage 3's max with it) is searched to max(rtol, 2e-3)
        return max(rtol, 2e-3) if row["params"].get("channel") == "staircase" else rtol
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, default=harness.out_path("threshold_graphs", "points.jsonl"),
                   help="the JSON-lines file the points are appended to")
    r.add_argument("--only", nargs="*")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUES",
                   help="an override as for `seqphase run --set` (repeatable; applies to every sweep)")
    r.add_argument("--task-log", help="also write each sweep's graph (CPU time of every work, round by round) "
                   "as benchmarks/parallelism.py task logs into this folder")
    c = sub.add_parser("compare")
    c.add_argument("old")
    c.add_argument("new")
    args = parser.parse_args(argv)
    if args.cmd == "run":
        run(args.out, args.only, args.task_log, args.overrides)
    else:
        return 1 if compare(args.old, args.new, bound_of) else 0


if __name__ == "__main__":
    sys.exit(main())
