"""Show that a refactor keeps every stored number: run short grids of the shipped sweeps with the old
and the new code, then compare the two stores variable by variable.

    # with the old checkout installed:  python benchmarks/compare_stores.py run  --store /tmp/before.zarr
    # with the new checkout installed:  python benchmarks/compare_stores.py run  --store /tmp/after.zarr
    python benchmarks/compare_stores.py compare /tmp/before.zarr /tmp/after.zarr

`run` covers every model family and every method (SE, GAMP, thresholds, SGD) on grids small enough
for a few minutes on 2 cores. `compare` prints, per sweep, the number of values compared, how many
are bit-identical, and the largest absolute and relative differences; it exits 1 when a value
differs by more than --rtol (default 1e-12) relative to max(|a|, |b|, 1e-300), or when NaN patterns,
dims, coordinates or the done-ledger differ. Provenance (run times, hosts, timestamps) is not compared.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

#: (stored name, shipped sweep, --set overrides): every family x method, short grids
SHORT_SWEEPS = [
    ("glm-perceptron-se", "glm-perceptron-se", ["alpha=0.5,1,2,5"]),
    ("glm-binary-perceptron-se", "glm-binary-perceptron-se", ["alpha=1.0,1.3,1.6"]),
    ("glm-cs-se", "glm-perceptron-se", ["prior=gauss-bernoulli", "channel=linear", "rho=0.3",
                                        "alpha=0.3,0.6"]),
    ("glm-phase-se", "glm-perceptron-se", ["channel=abs,square", "alpha=0.4,1.2"]),
    ("glm-perceptron-gamp", "glm-perceptron-gamp", ["alpha=1,3", "d=200", "n_seeds=2", "max_iter=30"]),
    ("glm-phase-gamp", "glm-perceptron-gamp", ["channel=abs", "alpha=2", "d=200", "n_seeds=2",
                                               "max_iter=30", "damping=0.3"]),
    ("glm-binary-perceptron-thresholds", "glm-binary-perceptron-thresholds", []),
    ("glm-phase-retrieval-thresholds", "glm-phase-retrieval-thresholds", []),
    ("glm-cs-thresholds", "glm-cs-thresholds", ["rho=0.5"]),
    ("multiindex-thresholds", "multiindex-thresholds", []),
    ("multiindex-norm2-thresholds", "multiindex-norm2-thresholds", []),
    ("multiindex-staircase-se", "multiindex-staircase-se", ["alpha=0.5,2.0", "n_mc=1000", "max_iter=40"]),
    ("multiindex-se-p1p2", "multiindex-staircase-se", ["channel=abs,square,z1z2,sign-z1z2", "alpha=0.8,2.0",
                                                       "n_mc=1000", "max_iter=40"]),
    ("multiindex-gamp", "multiindex-gamp", ["alpha=1.5,3", "d=200", "n_seeds=2", "max_iter=30"]),
    ("multiindex-gamp-p1", "multiindex-gamp", ["channel=abs,square", "alpha=1.5", "d=200", "n_seeds=2",
                                               "max_iter=20"]),
    ("smi-2layer-se", "smi-2layer-se", ["alpha=0.3,0.9,1.3", "n_mc=256", "n_error=5000"]),
    ("smi-3layer-se", "smi-3layer-se", ["alpha=0.5", "n_mc=64", "max_iter=6", "n_error=2000"]),
    ("smi-2layer-gamp", "smi-2layer-gamp", ["alpha=0.5,1.2", "d=100", "n_seeds=2", "max_iter=10",
                                            "n_gen=100"]),
    ("smi-thresholds", "smi-thresholds", ["skip=1.0", "n_k=4096", "n_mc=256", "rtol=0.01"]),
    ("smi-sgd", "smi-sgd", ["d=40", "n_runs=2", "epochs=6", "log_every=2", "test_every=2", "n_test=200"]),
    ("aim-gamp", "aim-gamp", ["alpha=0.1,0.5", "d=40", "n_seeds=2", "max_iter=10"]),
    ("aim-gd", "aim-gd", ["alpha=0.075", "d=16", "n_seeds=2", "n_students=4", "steps=50", "log_every=10"]),
    ("quadratic-gamp", "quadratic-gamp", ["alpha=0.2", "d=40", "n_seeds=2", "max_iter=10"]),
    ("quadratic-gd", "quadratic-gd", ["alpha=0.1", "d=20", "n_seeds=2", "n_students=4", "steps=50"]),
    ("quadratic-erm-experiment", "quadratic-erm-experiment", ["alpha=0.25", "kappa=2.0", "delta=0", "d=20",
                                                              "n_seeds=2"]),
    ("bsr-gamp", "bsr-gamp", ["alpha=0.4", "rho=0.5", "d=30", "n_seeds=2", "max_iter=10"]),
    ("bsr-gd", "bsr-gd", ["alpha=0.2", "d=16", "n_seeds=2", "n_students=4", "steps=50"]),
    ("bsr-baselines", "bsr-baselines", ["alpha=0.3,0.8", "rho=0.5", "d=10", "n_seeds=2"]),
    ("aim-softmax-se", "aim-softmax-se", ["rho=0.5,1.0", "T=2,3", "alpha=0.01,0.1,0.2"]),
    ("aim-linear-se", "aim-linear-se", ["rho=0.5", "alpha=0.05,0.15"]),
    ("aim-hardmax-se", "aim-hardmax-se", ["rho=0.5", "alpha=0.5,2.0"]),
    ("aim-small-width", "aim-small-width", ["alpha_bar=0.3,1.0,5.0"]),
    ("aim-thresholds", "aim-thresholds", ["rho=0.2,1.0", "T=2,3"]),
    ("aim-thresholds-hardmax", "aim-thresholds", ["channel=hardmax", "T=2", "rho=0.5"]),
    ("quadratic-se", "quadratic-se", ["kappa=0.5,2.0", "delta=0,0.25", "alpha=0.1,0.4"]),
    ("quadratic-thresholds", "quadratic-thresholds", ["kappa=0.3,1.5"]),
    ("quadratic-erm-se", "quadratic-erm-se", ["kappa_star=0.5", "kappa=2.0", "lam=0.1", "delta=0.5",
                                              "alpha=0.2,0.6"]),
    ("quadratic-erm-thresholds", "quadratic-erm-thresholds", ["kappa_star=0.5,2.0"]),
    ("bsr-se", "bsr-se", ["rho=0.2,0.5", "beta=1.0", "delta=0,0.5", "alpha=0.3,0.7"]),
    ("bsr-thresholds", "bsr-thresholds", ["rho=0.2,0.5", "beta=1.0,2.0"]),
    ("smi-thresholds-noiseless", "smi-thresholds-noiseless", ["skip=1.0", "n_k=4096", "n_mc=256", "rtol=0.01"]),
    ("smi-2layer-se-noiseless", "smi-2layer-se-noiseless", ["alpha=0.9,1.3", "n_mc=256", "n_error=2000",
                                                            "eps=1e-3,1e-4"]),
    ("glm-phase-retrieval-onset", "glm-phase-retrieval-onset", ["sizes=200,400", "n_seeds=4", "alpha_lo=0.1",
                                                                "alpha_hi=2.5", "alpha_n=6", "max_iter=100"]),
    ("multiindex-z1z2-onset", "multiindex-z1z2-onset", ["sizes=200,400", "n_seeds=4", "alpha_lo=0.1",
                                                        "alpha_hi=2.5", "alpha_n=6", "max_iter=100"]),
]

# fit_seconds: the wall time of a fit (machine and load dependent), like runtime_s
IGNORED_VARS = {"runtime_s", "finished_at", "host", "worker", "slurm_job_id", "attempts", "error", "fit_seconds"}


def run(store, workers, only):
    for name, sweep, sets in SHORT_SWEEPS:
        if only and name not in only:
            continue
        cmd = ["seqphase", "run", sweep, "--name", name, "--store", store, "--workers", str(workers),
               "--no-progress"] + [a for s in sets for a in ("--set", s)]
        print("+", " ".join(cmd), flush=True)
        code = subprocess.call(cmd)
        if code:
            print(f"{name}: exit {code}", flush=True)


def _compare_arrays(a, b, rtol):
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return a.size, 0, np.inf, np.inf, f"shape {a.shape} != {b.shape}"
    if a.dtype.kind not in "fiu" or b.dtype.kind not in "fiu":
        same = bool(np.all(a == b))
        return a.size, a.size if same else 0, 0.0, 0.0 if same else np.inf, "" if same else "values differ"
    a, b = a.astype(float), b.astype(float)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if np.any(nan_a != nan_b):
        return a.size, 0, np.inf, np.inf, f"NaN pattern differs at {int(np.sum(nan_a != nan_b))} entries"
    ok = ~nan_a
    same_inf = np.isinf(a) & (a == b)
    fin = ok & ~same_inf
    diff = np.abs(a[fin] - b[fin])
    scale = np.maximum(np.maximum(np.abs(a[fin]), np.abs(b[fin])), 1e-300)
    identical = int(np.sum(a[ok] == b[ok]) + 0)
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float((diff / scale).max()) if diff.size else 0.0
    problem = f"relative difference {max_rel:.3g} > {rtol:g}" if max_rel > rtol else ""
    return int(a.size), identical + int(np.sum(nan_a)), max_abs, max_rel, problem


def compare(before, after, rtol, only=None):
    import xarray as xr
    import zarr

    groups = sorted(zarr.open_group(before, mode="r").group_keys())
    groups = [g for g in groups if not only or g in only]
    failures = 0
    print(f"{'sweep':36s} {'values':>9s} {'identical':>9s} {'max |diff|':>11s} {'max rel':>9s}  verdict")
    for name in groups:
        try:
            a = xr.open_zarr(before, group=name, consolidated=False)
            b = xr.open_zarr(after, group=name, consolidated=False)
        except Exception as exc:  # a sweep missing on one side is a failure, not a crash
            print(f"{name:36s} cannot open: {exc}")
            failures += 1
            continue
        total = same = 0
        worst_abs = worst_rel = 0.0
        problems = []
        if dict(a.sizes) != dict(b.sizes):
            problems.append(f"dims {dict(a.sizes)} != {dict(b.sizes)}")
        for dim in a.dims:
            if dim in a.coords and dim in b.coords and not a[dim].equals(b[dim]):
                problems.append(f"coordinate {dim} differs")
        names = sorted(set(a.data_vars) | set(b.data_vars))
        for var in names:
            if var in IGNORED_VARS:
                continue
            if var not in a.data_vars or var not in b.data_vars:
                problems.append(f"{var} only in {'before' if var in a.data_vars else 'after'}")
                continue
            n, s, mabs, mrel, problem = _compare_arrays(a[var].values, b[var].values, rtol)
            total, same = total + n, same + s
            worst_abs, worst_rel = max(worst_abs, mabs), max(worst_rel, mrel)
            if problem:
                problems.append(f"{var}: {problem}")
        verdict = "; ".join(problems) if problems else ("identical" if same == total else f"within {rtol:g}")
        failures += bool(problems)
        print(f"{name:36s} {total:9d} {same:9d} {worst_abs:11.3g} {worst_rel:9.3g}  {verdict}")
    return 1 if failures else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the short grids into a store")
    r.add_argument("--store", required=True)
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--only", nargs="*", default=None, help="stored names to run (default: all)")
    c = sub.add_parser("compare", help="compare two stores")
    c.add_argument("before")
    c.add_argument("after")
    c.add_argument("--rtol", type=float, default=1e-12)
    c.add_argument("--only", nargs="*", default=None, help="stored names to compare (default: all)")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.store, args.workers, args.only)
        return 0
    return compare(args.before, args.after, args.rtol, args.only)


if __name__ == "__main__":
    sys.exit(main())
