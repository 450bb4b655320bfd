"""One point on 1 worker and on 2, back to back, each into a fresh store: the wall time of the whole
`seqphase run` command (Python and cluster start-up included) and of the sweep itself (the driver's
"in X s": first submission to last point stored), the speed-ups, and the machine's load beside each.

    python benchmarks/two_workers.py                      # the two cases below
    python benchmarks/two_workers.py --only gamp          # one of them

Cases (issue 23's measurements): one `smi-2layer-gamp` point (alpha = 1, d = 300, 16 seeds: 16 seed
tasks and the shared one) and one `smi-thresholds` skip (c = 1: Monte-Carlo blocks, routes and probe
rounds as tasks). Targets: >= 1.8x and >= 1.6x.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = {
    "gamp": ("smi-2layer-gamp", ["alpha=1.0", "d=300", "n_seeds=16"]),
    "thresholds": ("smi-thresholds", ["skip=1.0"]),
}


def run(sweep, sets, workers, store):
    cmd = [sys.executable, "-m", "seqphase.cli", "run", sweep, "--store", str(store), "--workers", str(workers),
           "--no-progress"] + [a for s in sets for a in ("--set", s)]
    load = os.getloadavg()[0]
    started = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if out.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    # the driver's own time (first submission to last point stored), without the cluster's start-up
    sweep_s = float(re.search(r"points\) in ([0-9.]+) s", out.stderr).group(1))
    return wall, sweep_s, load


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(CASES), nargs="*", default=None)
    args = parser.parse_args(argv)
    print("| case | 1 worker: command / sweep (s) | 2 workers: command / sweep (s) | speed-up: command / sweep | "
          "load (1 / 2) |")
    print("|---|---|---|---|---|")
    for name in args.only or sorted(CASES):
        sweep, sets = CASES[name]
        with tempfile.TemporaryDirectory() as scratch:
            one, one_sweep, load1 = run(sweep, sets, 1, Path(scratch) / "one.zarr")
            two, two_sweep, load2 = run(sweep, sets, 2, Path(scratch) / "two.zarr")
            status = subprocess.run([sys.executable, "-m", "seqphase.cli", "status", sweep, "--store",
                                     str(Path(scratch) / "two.zarr")], capture_output=True, text=True).stdout
        print(f"| {sweep} {' '.join(sets)} | {one:.1f} / {one_sweep:.1f} | {two:.1f} / {two_sweep:.1f} | "
              f"{one / two:.2f} / {one_sweep / two_sweep:.2f} | {load1:.1f} / {load2:.1f} |", flush=True)
        print("\n".join("    " + line for line in status.splitlines() if "width" in line or "wall time" in line),
              file=sys.stderr)


if __name__ == "__main__":
    main()
