"""Wall times of the shipped GLM sweeps on the embedded local cluster, 1 and 2 workers, as a table.

    python benchmarks/run.py [--workers 1,2] [--sweeps NAME,...]
    python benchmarks/run.py --smi-gout [--samples N ...]   (= python benchmarks/smi_gout.py [...])

Each measurement runs the sweep from scratch into a fresh temporary store. `sweep s` is the time from
the first submission to the last point stored; `total s` adds the cluster start-up and the template.
"""

import argparse
import os
import sys
import tempfile
import time

DEFAULT_SWEEPS = ["glm-perceptron-se", "glm-perceptron-gamp", "glm-binary-perceptron-thresholds",
                  "glm-phase-retrieval-thresholds", "glm-cs-thresholds"]


def measure(name, workers):
    from seqphase.cluster import connect, run_sweep
    from seqphase.results.store import Store
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    plan = plan_sweep(load_sweep(name))
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        with connect("local", workers=workers) as client:
            group = Store(os.path.join(folder, "bench.zarr")).prepare(plan)
            summary = run_sweep(plan, group, client, progress=False)
        total = time.perf_counter() - started
    return len(plan.points), summary, total


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--sweeps", default=",".join(DEFAULT_SWEEPS))
    parser.add_argument("--smi-gout", action="store_true",
                        help="run the per-sample g_out benchmark of the SMI channel instead (benchmarks/smi_gout.py; "
                             "the remaining options are passed to it)")
    args, rest = parser.parse_known_args()
    if args.smi_gout:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import smi_gout

        return smi_gout.main(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    rows = []
    print(f"{'sweep':36s} {'points':>6s} {'workers':>7s} {'sweep s':>8s} {'total s':>8s} {'failed':>6s}")
    for name in args.sweeps.split(","):
        for workers in (int(w) for w in args.workers.split(",")):
            points, summary, total = measure(name, workers)
            rows.append((name, points, workers, summary.elapsed_s, total, summary.failed))
            print(f"{name:36s} {points:6d} {workers:7d} {summary.elapsed_s:8.1f} {total:8.1f} {summary.failed:6d}",
                  flush=True)
    return 1 if any(r[-1] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
