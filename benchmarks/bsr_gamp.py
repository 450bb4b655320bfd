"""Benchmark: GAMP-RIE of bilinear sequence regression (core/bsr/gamp.py) at d = L = 100.

Per point (rho, alpha; beta = 1, delta = 0, one instance, damping 0.5, spec start):
* time to draw the instance (X in blocks, labels from the float64 blocks);
* time per iteration: median of the iterations' wall times, and its split between the two products with
  X (X vec(S_hat) and X^T g) and the rest (SVD + rectangular RIE map + table look-up), timed by wrapping the
  hooks of one `BSRSteps`;
* memory: bytes of X (float32: 4 n d L) and the peak RSS of a fresh interpreter that runs the point
  (VmHWM of /proc/self/status), so the 400 MB budget at alpha = 1 is checked on the whole process.
Single-threaded BLAS (the cluster's workers run with one thread; timings do not depend on the shared
machine's free cores).

    python benchmarks/bsr_gamp.py                 # rho = 0.5, alpha = 0.5 and 1.0, d = 100
    python benchmarks/bsr_gamp.py --d 60 --alpha 0.5
"""

from __future__ import annotations

import harness

harness.single_threaded()

import argparse  # noqa: E402

import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402


def measure(rho, alpha, d, precision, max_iter):
    from seqphase.core import gamp as loop
    from seqphase.core.bsr import gamp
    from seqphase.core.bsr.channels import BSRChannel
    from seqphase.core.rectangular_rie import rectangular_mmse_table

    channel = BSRChannel(0.0)
    rectangular_mmse_table(rho, 1.0)  # built once per process in a sweep: not part of an iteration
    instance_seq, init_seq = np.random.SeedSequence(2024).spawn(2)
    t0 = time.perf_counter()
    X, S_true, y = gamp.sample_instance(channel, alpha, rho, 1.0, d, instance_seq, precision)
    t_instance = time.perf_counter() - t0
    L, r, n = gamp.sizes(alpha, rho, 1.0, d)
    S_init = gamp.prior_sample(d, L, r, np.random.default_rng(init_seq))
    steps = gamp.BSRSteps(channel, X, y, S_true, r / d, L / d, S_init=S_init)
    spent = {"products": 0.0, "denoise": 0.0}

    def timed(hook, key):
        def wrapper(*args):
            t = time.perf_counter()
            out = hook(*args)
            spent[key] += time.perf_counter() - t
            return out
        return wrapper

    steps.project = timed(steps.project, "products")
    steps.fields = timed(steps.fields, "products")
    steps.denoise = timed(steps.denoise, "denoise")
    t0 = time.perf_counter()
    run = loop.iterate(steps, max_iter=max_iter, damping=0.5, tol=1e-6)
    total = time.perf_counter() - t0
    it = max(run.n_iter, 1)
    return {"rho": rho, "alpha": alpha, "d": d, "n": n, "precision": precision, "X_MB": X.nbytes / 1e6,
            "instance_s": t_instance, "n_iter": run.n_iter, "s_per_iter": total / it,
            "products_s_per_iter": spent["products"] / it, "denoise_s_per_iter": spent["denoise"] / it,
            "final_mse": run.mse[-1]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--rho", type=float, default=0.5)
    parser.add_argument("--alpha", type=float, nargs="+", default=[0.5, 1.0])
    parser.add_argument("--precision", default="float32", choices=("float32", "float64"))
    parser.add_argument("--max-iter", type=int, default=200)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        out = measure(args.rho, args.alpha[0], args.d, args.precision, args.max_iter)
        out["peak_rss_MB"] = harness.peak_rss_mb()
        print(json.dumps(out))
        return
    harness.print_machine()
    print(f"{'rho':>4} {'alpha':>5} {'d':>4} {'n':>6} {'prec':>7} {'X MB':>6} {'draw s':>6} {'iters':>5} "
          f"{'s/iter':>7} {'X prod':>7} {'RIE':>7} {'peak MB':>8} {'final mse':>9}")
    for alpha in args.alpha:
        cmd = [sys.executable, __file__, "--child", "--d", str(args.d), "--rho", str(args.rho), "--alpha",
               str(alpha), "--precision", args.precision, "--max-iter", str(args.max_iter)]
        r = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
        print(f"{r['rho']:4g} {r['alpha']:5g} {r['d']:4d} {r['n']:6d} {r['precision']:>7} {r['X_MB']:6.0f} "
              f"{r['instance_s']:6.2f} {r['n_iter']:5d} {r['s_per_iter']:7.3f} {r['products_s_per_iter']:7.3f} "
              f"{r['denoise_s_per_iter']:7.3f} {r['peak_rss_MB']:8.0f} {r['final_mse']:9.4f}")


if __name__ == "__main__":
    main()
