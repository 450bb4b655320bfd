"""Benchmark: GAMP-RIE of the AIM (core/aim/gamp.py) against the reference method's tensor approach.

The authors' AMP builds the design as one (n, d, d, T, T) tensor (x_mu,a,i x_mu,b,j) and einsums it with
S_hat (the projection) and with G (the back-projection): n d^2 T^2 floats, 25.6 GB at d = 100, alpha = 8,
T = 2. `TensorSteps` below is our re-implementation of that approach from its description in spec aim.md
§3 (the same g_out, qhat and RIE step as ours; only the two projections differ), so both run in the same
process and give the same iterates (checked: max |S_hat difference| is printed).

Measured, hardmax T = 2 (exact g_out), rho = 0.5, one instance per point:
* time per iteration: the median of `--iters` iterations after the first (single-threaded BLAS, so the
  figures do not depend on how many cores the shared machine hands out);
* peak memory of the run: tracemalloc's peak of the numpy allocations from the instance on (the tensor's
  construction included), in this process;
* the headline points (ours, d = 100, alpha = 1 and 8) also in a fresh subprocess, run first: peak RSS
  of the whole interpreter (VmHWM of /proc/self/status; getrusage's ru_maxrss would carry this
  process's high-water mark across fork/exec), which must stay < 1 GB.
Scaling exponents are least-squares slopes of log(time) and log(memory) against log(d) at fixed alpha.

    python benchmarks/aim_gamp.py                 # full table (a few minutes)
    python benchmarks/aim_gamp.py --quick         # small sizes only
"""

from __future__ import annotations

import harness

harness.single_threaded()

import argparse  # noqa: E402

import math  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

from seqphase.core import gamp as loop  # noqa: E402
from seqphase.core.aim import gamp  # noqa: E402
from seqphase.core.aim.channels import make_channel, pairs  # noqa: E402

RHO = 0.5


class TensorSteps(gamp.AIMSteps):
    """The reference method's tensor approach: the design tensor D[mu, i, j, a, b] = x_mu,a,i x_mu,b,j
    built once, Omega and B by einsum over it."""

    def __init__(self, channel, X, y, S_true, rho):
        super().__init__(channel, X, y, S_true, rho, cavity="scalar")
        self.D = np.einsum("nai,nbj->nijab", X, X)

    def project(self, S_hat):
        d = self.d
        rows, cols = pairs(self.T)
        Omega = np.einsum("nijab,ij->nab", self.D, S_hat) / math.sqrt(d)
        Omega[:, np.arange(self.T), np.arange(self.T)] -= np.trace(S_hat) / math.sqrt(d)
        return Omega[:, rows, cols]

    def fields(self, g, dg, S_hat):
        d = self.d
        rows, cols = pairs(self.T)
        qhat = 2.0 * float(np.sum((g * g) @ self.entry_weights)) / d**2
        self.precision = qhat
        G = np.zeros((self.n, self.T, self.T))
        G[:, rows, cols] = g
        G[:, cols, rows] += np.where(rows == cols, 0.0, 1.0) * g
        G *= np.where(np.eye(self.T, dtype=bool), 1.0, 0.5)
        B = np.einsum("nijab,nab->ij", self.D, G)
        B = 0.5 * (B + B.T) - float(np.sum(g[:, rows == cols])) * np.eye(d)
        return qhat, S_hat + (2.0 / (qhat * d**1.5)) * B


class Timed:
    """Wraps steps: wall time of each iteration (from one `cavity` call to the next)."""

    def __init__(self, steps):
        self.steps, self.stamps = steps, []

    def __getattr__(self, name):
        attr = getattr(self.steps, name)
        if name == "cavity":
            def cavity(c):
                self.stamps.append(time.perf_counter())
                return attr(c)
            return cavity
        return attr


def measure(kind, alpha, d, iters, seed=0):
    """(seconds per iteration, traced peak bytes, final S_hat) of `iters` iterations at (alpha, d)."""
    channel = make_channel("hardmax", 2, "exact")
    gamp.mmse_table(RHO)
    tracemalloc.start()
    X, S, y = gamp.sample_instance(channel, alpha, RHO, d, np.random.default_rng(seed))
    steps = Timed(TensorSteps(channel, X, y, S, RHO) if kind == "tensor"
                  else gamp.AIMSteps(channel, X, y, S, RHO, cavity="scalar"))
    run = loop.iterate(steps, max_iter=iters + 1, damping=0.5, tol=0.0)
    stamps = steps.stamps + [time.perf_counter()]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    per_iter = float(np.median(np.diff(stamps)[1:]))
    return per_iter, peak, run.w


_RSS_PROBE = """
import os, resource, sys
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1"); os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np
from seqphase.core import gamp as loop
from seqphase.core.aim import gamp
from seqphase.core.aim.channels import make_channel
alpha, d, iters = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
channel = make_channel("hardmax", 2, "exact")
X, S, y = gamp.sample_instance(channel, alpha, 0.5, d, np.random.default_rng(0))
trace = loop.iterate(gamp.AIMSteps(channel, X, y, S, 0.5), max_iter=iters, damping=0.5, tol=0.0)
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM")][0].split()[1]
print(int(hwm) * 1024, trace.mse[-1])
"""


def peak_rss(alpha, d, iters):
    out = subprocess.run([sys.executable, "-c", _RSS_PROBE, str(alpha), str(d), str(iters)], capture_output=True,
                         text=True, check=True)
    rss, mse = out.stdout.split()
    return int(rss), float(mse)


def slope(ds, values):
    return float(np.polyfit(np.log(ds), np.log(values), 1)[0])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--iters", type=int, default=4, help="timed iterations per point")
    parser.add_argument("--tensor-gb", type=float, default=2.5, help="largest design tensor to build")
    args = parser.parse_args(argv)
    harness.print_machine()
    sizes = {1.0: [40, 60, 80, 100], 8.0: [30, 40, 50, 60, 80, 100]}
    if args.quick:
        sizes = {1.0: [30, 40], 8.0: [20, 30]}
    if not args.quick:  # first, while this process is small
        for alpha in (1.0, 8.0):
            rss, mse = peak_rss(alpha, 100, 5)
            print(f"ours, d = 100, alpha = {alpha:g}, 5 iterations, fresh process: peak RSS {rss / 1e6:.0f} MB "
                  f"(< 1 GB: {rss < 1e9}); error after 5 iterations {mse:.4f}")
    rows = []
    for alpha, ds in sizes.items():
        for d in ds:
            n = int(round(alpha * d * d))
            ours = measure("ours", alpha, d, args.iters)
            tensor_bytes = n * d * d * 4 * 8
            tensor = None
            if tensor_bytes <= args.tensor_gb * 1e9:
                tensor = measure("tensor", alpha, d, args.iters)
                diff = float(np.max(np.abs(tensor[2] - ours[2])))
            rows.append((alpha, d, n, ours, tensor, tensor_bytes, diff if tensor else math.nan))
            t = f"{tensor[0] * 1e3:9.1f} ms {tensor[1] / 1e6:9.1f} MB" if tensor else f"{'(not run)':>12} {tensor_bytes / 1e9:8.1f} GB*"
            print(f"alpha {alpha:4g} d {d:4d} n {n:6d} | ours {ours[0] * 1e3:8.1f} ms {ours[1] / 1e6:7.1f} MB | "
                  f"tensor {t} | ratio t {tensor[0] / ours[0] if tensor else math.nan:6.1f} "
                  f"mem {tensor[1] / ours[1] if tensor else math.nan:6.1f} | max|dS| {rows[-1][-1]:.1e}", flush=True)
    print("\nscaling exponents (log-log slope in d at fixed alpha):")
    for alpha in sizes:
        sub = [r for r in rows if r[0] == alpha]
        ds = np.array([r[1] for r in sub], float)
        print(f"  alpha {alpha:g}: ours time d^{slope(ds, [r[3][0] for r in sub]):.2f} memory "
              f"d^{slope(ds, [r[3][1] for r in sub]):.2f}", end="")
        tsub = [r for r in sub if r[4]]
        if len(tsub) >= 2:
            tds = np.array([r[1] for r in tsub], float)
            print(f" | tensor time d^{slope(tds, [r[4][0] for r in tsub]):.2f} memory "
                  f"d^{slope(tds, [r[4][1] for r in tsub]):.2f}")
        else:
            print()
    print(f"peak RSS of this process {harness.peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
