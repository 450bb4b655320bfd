"""Wall time of the multiindex-thresholds sweep on 1 and 2 workers (pattern of benchmarks/run.py).

    python benchmarks/multiindex.py [--workers 1,2]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import measure  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--sweeps", default="multiindex-thresholds")
    args = parser.parse_args()
    print(f"{'sweep':36s} {'points':>6s} {'workers':>7s} {'sweep s':>8s} {'total s':>8s} {'failed':>6s}")
    failed = 0
    for name in args.sweeps.split(","):
        for workers in (int(w) for w in args.workers.split(",")):
            points, summary, total = measure(name, workers)
            failed += summary.failed
            print(f"{name:36s} {points:6d} {workers:7d} {summary.elapsed_s:8.1f} {total:8.1f} {summary.failed:6d}",
                  flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
