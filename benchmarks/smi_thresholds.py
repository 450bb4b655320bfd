"""The deep-attention phase diagram (`smi-thresholds`: 18 skips, alpha_2 and alpha_1, stability and SE map)
on the embedded local cluster: wall time on 1 and 2 workers, and each point's CPU time and thresholds.

    python benchmarks/smi_thresholds.py [--workers 1,2] [--set skip=0.5,1.0 ...]
    python benchmarks/smi_thresholds.py --points 1.0,0.0001     (in this process, one skip at a time)

`--points` runs the threshold method in-process and prints, per skip, the CPU seconds and both routes
(the same random streams as the sweep's points; the per-point costs whose sum bounds the sweep: on 2 workers the sweep takes at least max(largest point,
total / 2)). Without it, each worker count runs the whole sweep from scratch into a fresh temporary
store: `sweep s` is the time from the first submission to the last point stored, `total s` adds the
cluster start-up, `works` / `work_s` / `chain_s` are the run record's (threshold version 6 cuts a point
into works: Monte Carlo blocks, route and probe passes; work_s sums their runtimes, chain_s is the
longest chain of one point's stages), with the list-scheduling bounds on `--on` workers; the table of
thresholds of the last run follows.
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np


def _row(skip, out, cpu):
    a2s, a2b, a1s, a1b = (float(out[k]) for k in ("alpha2_stability", "alpha2_bisection", "alpha1_stability",
                                                   "alpha1_bisection"))
    return (f"{skip:8g} {cpu:8.1f} {a2s:8.5f} {a2b:8.5f} {100 * (a2b / a2s - 1):+7.2f} {a1s:8.5f} {a1b:8.5f} "
            f"{100 * (a1b / a1s - 1):+7.2f} {float(out['q_star_at_alpha1']):7.4f}  {out['note']}")


HEADER = (f"{'skip':>8s} {'cpu s':>8s} {'a2 stab':>8s} {'a2 map':>8s} {'diff %':>7s} {'a1 stab':>8s} "
          f"{'a1 map':>8s} {'diff %':>7s} {'q*':>7s}  note")


def points(skips, overrides):
    from seqphase.core.models import run_point
    from seqphase.sweeps.planner import seed_key
    from seqphase.sweeps.spec import load_sweep

    sweep = load_sweep("smi-thresholds", overrides)
    print(HEADER)
    total = 0.0
    for skip in skips:
        started = time.process_time()
        params = {"skip": skip, "depth": 2}
        out = run_point("smi", "threshold", params, dict(sweep.settings), sweep.seed, seed_key(params))
        cpu = time.process_time() - started
        total += cpu
        print(_row(skip, out, cpu), flush=True)
    print(f"total CPU {total:.1f} s")


def sweep(workers_list, overrides, keep=None, on=256):
    from seqphase.cluster import connect, run_sweep
    from seqphase.results.query import open_results
    from seqphase.results.store import Store
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    plan = plan_sweep(load_sweep("smi-thresholds", overrides))
    print(f"{'workers':>7s} {'points':>6s} {'sweep s':>8s} {'total s':>8s} {'failed':>6s} {'works':>6s} "
          f"{'work_s':>8s} {'chain_s':>8s}")
    failed = 0
    for workers in workers_list:
        with tempfile.TemporaryDirectory() as folder:
            last = workers == workers_list[-1]
            path = keep if (keep and last) else os.path.join(folder, "bench.zarr")
            started = time.perf_counter()
            with connect("local", workers=workers) as client:
                group = Store(path).prepare(plan)
                summary = run_sweep(plan, group, client, progress=False)
            total = time.perf_counter() - started
            width = summary.width  # the run record's works, work_s (CPU-s summed), chain_s (longest chain)
            print(f"{workers:7d} {len(plan.points):6d} {summary.elapsed_s:8.1f} {total:8.1f} {summary.failed:6d} "
                  f"{width.get('works', 0):6d} {width.get('work_s', 0):8.1f} {width.get('chain_s', 0):8.1f}", flush=True)
            if width:
                # Graham's list-scheduling bound on `on` workers: no more than work / W + longest chain, no
                # less than either; with W far above the width of a stage the chain decides
                lo_s = max(width["work_s"] / on, width["chain_s"])
                print(f"        list-scheduled on {on} workers: between {lo_s:.1f} and "
                      f"{width['work_s'] / on + width['chain_s']:.1f} s", flush=True)
            failed += summary.failed
            if last:
                ds = open_results("smi-thresholds", path).load()
                print(HEADER.replace("cpu s", "point s"))
                cell = ds.isel({d: 0 for d in ds.dims if d not in ("skip",)})
                for skip in cell["skip"].values:
                    out = {k: cell[k].sel(skip=skip).values.item() for k in cell.data_vars}
                    runtime = out.get("runtime_s", np.nan)
                    print(_row(float(skip), out, float(runtime)), flush=True)
    return 1 if failed else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--set", action="append", default=[], dest="overrides",
                        help="a spec override as for `seqphase run --set` (repeatable)")
    parser.add_argument("--keep", default=None, help="store of the last worker count (kept; default: a temporary one)")
    parser.add_argument("--on", type=int, default=256, help="workers of the list-scheduling bound (default 256)")
    parser.add_argument("--points", default=None, help="comma-separated skips to run in this process instead")
    args = parser.parse_args(argv)
    if args.points:
        points([float(s) for s in args.points.split(",")], args.overrides)
        return 0
    return sweep([int(w) for w in args.workers.split(",")], args.overrides, args.keep, args.on)


if __name__ == "__main__":
    sys.exit(main())
