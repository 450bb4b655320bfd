"""The onset's posterior grid (smi onset setting `posterior`: 'coarse') against the SE's ('fine'), on the same
GAMP instances: does the coarser grid move the final overlaps the onset rule reads, and what does it save?

    python benchmarks/smi_onset_grid.py run [--skip 0.1] [--d 500] [--alphas 0.7,0.8] [--seeds 16]
                                            [--grids fine,coarse] [--workers 2] [--log FILE]
    python benchmarks/smi_onset_grid.py table [--log FILE]
    python benchmarks/smi_onset_grid.py posterior [--skip 0.1] [--d 500] [--alpha 0.8] [--iters 80]

`run` runs GAMP (the onset method's settings: damping 0.2, random start, cavity eps 1e-3, at most 150
iterations, tol 1e-6, no early stop) on `--seeds` instances per alpha, each once per grid of
`core.smi.channels.RESOLUTIONS`, on one stream per (skip, d, alpha, seed) (entropy 4343, so the pairs share
the instance, the start and everything else), and appends per run the per-iteration |M11| and |M22| (7
decimals), the iterations and the CPU seconds to the log (default
benchmarks/results/onset/smi-c<skip>-d<d>-grid-pairs.jsonl; an existing run is not repeated). `table` prints,
per alpha and grid: the mean final |M11| and |M22| with their standard error over the seeds, the instances
above the level 2 / sqrt(d), the mean paired difference of the final overlaps from the first grid's with its
standard error, and the CPU seconds.

`posterior` records the posterior calls of one GAMP run (`--iters` iterations, tol 0, every 8th call kept)
and evaluates them on each grid and on a reference grid (80 cells a side at level 0, tolerance 1e-7): per grid,
the CPU ms per sample, and the error of the posterior mean in units of the posterior's sd and the relative
error of its variance (median, 99th percentile, largest) over every sample and component. Besides the named
grids it shows 'fine' at the coarse grid's tolerance alone (what the other two coarsenings add).

The same logs replay the stopping rule with both layers (`python benchmarks/onset_stopping.py`).
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "onset"
ENTROPY = 4343


def log_path(skip, d):
    return OUT / f"smi-c{skip:g}-d{d}-grid-pairs.jsonl"


def one(job):
    """GAMP on one instance on one posterior grid: the log row."""
    from seqphase.core.models import get_model
    from seqphase.core.smi.channels import RESOLUTIONS
    from seqphase.core.smi.model import gamp_instance

    skip, d, alpha, seed, grid = job
    settings = {k: p.default for k, p in get_model("smi").method("onset").settings.items()}
    stream = np.random.SeedSequence([ENTROPY, int(round(1e4 * skip)), d, int(round(100 * alpha)), seed])
    start = time.process_time()
    tr, _ = gamp_instance({"skip": skip, "depth": 2}, settings, alpha, d, stream, n_gen=10,
                          resolution=RESOLUTIONS[grid])
    m = np.abs(np.array(tr.overlap))
    return {"skip": skip, "d": d, "alpha": alpha, "seed": seed, "posterior": grid,
            "cpu_s": round(time.process_time() - start, 2), "n_iter": tr.n_iter, "converged": bool(tr.converged),
            "m11": m[:, 0, 0].round(7).tolist(), "m22": m[:, 1, 1].round(7).tolist()}


def read(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def run(args):
    path = Path(args.log or log_path(args.skip, args.d))
    done = {(r["alpha"], r["seed"], r["posterior"]) for r in read(path)} if path.exists() else set()
    jobs = [(args.skip, args.d, a, s, g) for a in args.alphas for s in range(args.seeds) for g in args.grids
            if (a, s, g) not in done]
    print(f"{len(jobs)} runs to {path} ({len(done)} logged)")
    path.parent.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(args.workers) as pool, path.open("a") as log:
        for row in pool.map(one, jobs):
            log.write(json.dumps(row) + "\n")
            log.flush()
    table(path)


def table(path):
    rows = read(path)
    d = rows[0]["d"]
    level = 2.0 / math.sqrt(d)
    grids = list(dict.fromkeys(r["posterior"] for r in rows))  # in the order first run
    print(f"{path.name}: skip {rows[0]['skip']:g}, d = {d}, level {level:.4f}")
    for alpha in sorted({r["alpha"] for r in rows}):
        runs = {t: {r["seed"]: r for r in rows if r["alpha"] == alpha and r["posterior"] == t} for t in grids}
        seeds = sorted(set.intersection(*(set(v) for v in runs.values())))
        final = {t: np.array([[runs[t][s]["m11"][-1], runs[t][s]["m22"][-1]] for s in seeds]) for t in grids}
        for t in grids:
            f = final[t]
            se = f.std(axis=0, ddof=1) / math.sqrt(len(seeds))
            cpu = sum(runs[t][s]["cpu_s"] for s in seeds)
            iters = np.mean([runs[t][s]["n_iter"] for s in seeds])
            print(f"  alpha {alpha:g}, {t}, {len(seeds)} seeds: |M11| {f[:, 0].mean():.4f} +- {se[0]:.4f} "
                  f"({(f[:, 0] > level).sum()} above the level), |M22| {f[:, 1].mean():.4f} +- {se[1]:.4f}; "
                  f"{iters:.0f} iterations, {cpu:.0f} CPU-s")
        base = final[grids[0]]
        for t in grids[1:]:
            diff = final[t] - base
            se = diff.std(axis=0, ddof=1) / math.sqrt(len(seeds))
            same = np.abs(diff).max(axis=1) < 1e-3
            print(f"    {t} - {grids[0]}: |M11| {diff[:, 0].mean():+.4f} +- {se[0]:.4f}, |M22| {diff[:, 1].mean():+.4f} "
                  f"+- {se[1]:.4f}; {same.sum()} of {len(seeds)} instances end within 1e-3 of each other")


def posterior(args):
    """The posterior's errors and cost on each grid on the calls of one GAMP run (module docstring)."""
    from seqphase.core.smi import channels
    from seqphase.core import gamp
    from seqphase.core.smi import gamp as sgamp
    from seqphase.core.smi.channels import RESOLUTIONS
    from seqphase.core.smi import posterior as post

    kernel, calls = channels.posterior_2layer, []

    def recording(*a):
        calls.append(a)
        return kernel(*a)

    channels.posterior_2layer = recording
    ch = channels.AttentionChannel(2, args.skip)
    X, W, _, u = sgamp.sample_instance(ch, args.alpha, args.d, np.random.default_rng(3))
    tr = gamp.iterate(sgamp.AttentionSteps(ch, X, u, W, np.random.default_rng(4)), max_iter=args.iters, damping=0.2,
                      tol=0.0)
    channels.posterior_2layer = kernel
    calls = calls[::8]
    print(f"skip {args.skip:g}, d = {args.d}, alpha {args.alpha:g}: {len(calls)} calls of "
          f"{calls[0][0].shape[0]} samples; final |M11| {abs(tr.overlap[-1][0, 0]):.3f}, "
          f"|M22| {abs(tr.overlap[-1][1, 1]):.3f}")

    def evaluate(change):
        out, spent = [], 0.0
        for a in calls:
            a = change(list(a))
            start = time.process_time()
            out.append(post.posterior_2layer(*a))
            spent += time.process_time() - start
        return spent, [np.concatenate([o[k] for o in out]) for k in range(3)]

    def reference(a):
        a[5], a[6], a[7], a[11], a[12] = 80, 30.0, 1e-7, -708.0, 1.0
        if a[9] < post.RHO_MAX:  # strip coordinates on the finer grid too (rho grows with the finer step)
            rho, B = post.strip_map(a[4], a[3], 80)
            a[9], a[10] = min(rho, 0.45), B
        else:
            a[7] = 0.0  # the plain grid has no error estimate (the channel's rule)
        return a

    def on(resolution):
        def change(a):
            a[7] = resolution.tol_strip if a[7] > 0 else 0.0  # the plain grid (large skips) has no error estimate
            a[11], a[12] = resolution.weight_floor, resolution.t_step
            return a
        return change

    fine, coarse = RESOLUTIONS["fine"], RESOLUTIONS["coarse"]
    grids = {"fine": fine, "fine at the coarse tol_strip": replace(fine, tol_strip=coarse.tol_strip), "coarse": coarse}
    post.posterior_2layer(*calls[0])  # compile / load the cache (every grid has the same argument types)
    _, (_, m_ref, s_ref) = evaluate(reference)
    var_ref = np.einsum("kii->ki", s_ref) - m_ref ** 2
    n = len(calls) * calls[0][0].shape[0]
    for name, resolution in grids.items():
        spent, (_, m, s) = evaluate(on(resolution))
        err = np.abs(m - m_ref) / np.sqrt(var_ref)
        var_err = np.abs(np.einsum("kii->ki", s) - m ** 2 - var_ref) / var_ref
        q = lambda e: f"{np.median(e):.1e} / {np.quantile(e, 0.99):.1e} / {e.max():.1e}"  # noqa: E731
        print(f"  {name}: {1e3 * spent / n:.3f} CPU ms a sample; mean error / sd (median / p99 / max) "
              f"{q(err)}; variance, relative {q(var_err)}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--skip", type=float, default=0.1)
    r.add_argument("--d", type=int, default=500)
    r.add_argument("--alphas", type=lambda s: [float(x) for x in s.split(",")], default=[0.7, 0.8])
    r.add_argument("--seeds", type=int, default=16)
    r.add_argument("--grids", type=lambda s: s.split(","), default=["fine", "coarse"])
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--log", default=None)
    p = sub.add_parser("posterior")
    p.add_argument("--skip", type=float, default=0.1)
    p.add_argument("--d", type=int, default=500)
    p.add_argument("--alpha", type=float, default=0.8)
    p.add_argument("--iters", type=int, default=80)
    t = sub.add_parser("table")
    t.add_argument("--log", default=str(log_path(0.1, 500)))
    args = ap.parse_args(argv)
    if args.cmd == "run":
        run(args)
    elif args.cmd == "posterior":
        posterior(args)
    else:
        table(Path(args.log))


if __name__ == "__main__":
    main()
