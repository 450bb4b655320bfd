"""Threshold points as graphs of tasks against the sequential bisections: the values, and the wall of a
point on 1 worker (serial) against the longest chain of its graph.

    # old code importable as `seqphase` (e.g. a checkout of the commit before, via PYTHONPATH):
    python benchmarks/threshold_graphs.py run --out /tmp/old.jsonl [--only SWEEP ...]
    # new code:
    python benchmarks/threshold_graphs.py run --out /tmp/new.jsonl [--only SWEEP ...]
    python benchmarks/threshold_graphs.py compare /tmp/old.jsonl /tmp/new.jsonl    # the docs tables

`run` appends one JSON line a point to --out.

`run` computes every point of the shipped threshold sweeps of glm, multiindex and quadratic-erm in this
process (`Model.run`), recording per point the values, the CPU time (time.process_time) and, for a
method with a task graph, the chain: the sum over the graph's rounds of the longest work of the round
(CPU time of each work run serially), i.e. the point's wall on as many workers as a round has works.
`compare` prints, value by value, old, new, the relative difference and the search's stated error.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

SWEEPS = ["glm-cs-thresholds", "glm-phase-retrieval-thresholds", "glm-binary-perceptron-thresholds",
          "multiindex-thresholds", "multiindex-norm2-thresholds", "quadratic-erm-thresholds"]


def _timed_drive(tasks):
    """Drive a task generator serially, timing every work: (outputs, CPU total, chain, works, rounds)."""
    chain = total = 0.0
    n_works = rounds = 0
    try:
        works = next(tasks)
        while True:
            results, longest = {}, 0.0
            for work in works:
                t0 = time.process_time()
                results[work.key] = work.fn(**work.kwargs)
                dt = time.process_time() - t0
                longest, total = max(longest, dt), total + dt
            chain += longest
            n_works += len(works)
            rounds += 1
            works = tasks.send(results)
    except StopIteration as stop:
        return stop.value, total, chain, n_works, rounds


def run(out, only):
    from seqphase.core.models import get_model, point_stream
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    for name in only or SWEEPS:
        plan = plan_sweep(load_sweep(name))
        model = get_model(plan.sweep.model)
        for point in plan.points:
            params, settings = plan.point_inputs(point)
            stream = point_stream(plan.sweep.seed, point.seed_key)
            t0 = time.process_time()
            gen = model.tasks(plan.sweep.method, params, settings, stream) if hasattr(model, "tasks") else None
            if gen is not None:
                values, cpu, chain, n_works, rounds = _timed_drive(gen)
            else:
                values = model.run(plan.sweep.method, params, settings, stream)
                cpu, chain, n_works, rounds = time.process_time() - t0, None, 1, 1
            row = {"sweep": name, "params": {k: v for k, v in params.items()}, "values": flat(values),
                   "cpu_s": cpu, "chain_s": chain, "works": n_works, "rounds": rounds,
                   "load": os.getloadavg()[0], "settings": {k: settings[k] for k in ("rtol", "k") if k in settings}}
            with open(out, "a") as fh:  # one JSON line a point, as it is computed
                fh.write(json.dumps(row) + "\n")
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


def _label(row):
    fixed = {"prior", "delta", "kappa", "channel"} if row["sweep"].startswith("glm-cs") else set()
    return ", ".join(f"{k}={v}" for k, v in row["params"].items() if k not in fixed and k != "delta")


def compare(old_path, new_path, errors):
    old = [json.loads(line) for line in open(old_path) if line.startswith("{")]
    new = [json.loads(line) for line in open(new_path) if line.startswith("{")]
    index = {(r["sweep"], json.dumps(r["params"], sort_keys=True)): r for r in old}
    print("| sweep | point | value | old (sequential) | new (graph) | rel. diff | stated error |")
    print("|---|---|---|---|---|---|---|")
    worst = 0.0
    for row in new:
        before = index[(row["sweep"], json.dumps(row["params"], sort_keys=True))]
        for name, value in row["values"].items():
            a = before["values"].get(name)
            if isinstance(value, str) or a is None or name.startswith("projector"):
                continue
            same = a == value or (math.isnan(a) and math.isnan(value))
            rel = 0.0 if same else abs(a - value) / max(abs(a), abs(value), 1e-300)
            err = errors(row["sweep"], name, row)
            if not same and err != "(not a search)":
                worst = max(worst, rel)
            print(f"| {row['sweep']} | {_label(row)} | {name} | {a:.10g} | {value:.10g} | "
                  f"{'identical' if same else f'{rel:.2e}'} | {err} |")
    print()
    print("| sweep | point | 1 worker: old / new (CPU-s) | longest chain (CPU-s) | works / rounds | load |")
    print("|---|---|---|---|---|---|")
    for row in new:
        before = index[(row["sweep"], json.dumps(row["params"], sort_keys=True))]
        print(f"| {row['sweep']} | {_label(row)} | {before['cpu_s']:.1f} / {row['cpu_s']:.1f} | "
              f"{row['chain_s']:.2f} | {row['works']} / {row['rounds']} | {before['load']:.1f} / {row['load']:.1f} |")
    return worst


def stated_error(sweep, name, row):
    """The search's error of a value: rtol of its final bracket (relative), the bound of core/search.py."""
    rtol = row["settings"].get("rtol")
    if sweep.startswith("glm"):
        return {"alpha_bisection": f"rtol = {rtol:g}", "alpha_it": "rtol = 1e-05"}.get(name, "(not a search)")
    if sweep.startswith("quadratic-erm"):
        return {"alpha_interp_bisection": f"rtol = {rtol:g}", "alpha_sr_bisection": f"rtol = {rtol:g}"}.get(
            name, "(not a search)")
    if name.startswith("alpha_bisection"):
        return f"rtol = {max(rtol, 2e-3):g} (perfect-recovery stage) / {rtol:g}"
    return "(not a search)"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--only", nargs="*")
    c = sub.add_parser("compare")
    c.add_argument("old")
    c.add_argument("new")
    args = parser.parse_args(argv)
    if args.cmd == "run":
        run(args.out, args.only)
    else:
        compare(args.old, args.new, stated_error)


if __name__ == "__main__":
    sys.exit(main())
