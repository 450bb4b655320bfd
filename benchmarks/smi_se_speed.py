"""The 2-layer SE sweep (`smi-2layer-se`, 48 alphas): per-point cost and curve, and the whole sweep's wall time.

    python benchmarks/smi_se_speed.py points [OUT.json] [--alphas 0.2,0.8] [--set method.n_mc=1024 ...]
    python benchmarks/smi_se_speed.py compare BEFORE.json AFTER.json [--seeds SEEDS.json]
    python benchmarks/smi_se_speed.py sweep [--workers 2] [--set ...]
    python benchmarks/smi_se_speed.py posterior [--alphas 0.8,1.0,1.3] [--repeat 3]

`points` runs the SE method in this process on the sweep's own points (the same random streams as
`seqphase run`) and writes to OUT.json (default benchmarks/out/smi_se_speed/points.json), per alpha, the CPU seconds (process time, so that a loaded machine does not
inflate it), the iterations (coarse + fine), Q11, Q22 and the errors. `compare` prints both curves side by side
with their differences; `--seeds` adds the scatter of the fixed point over independent point streams (a
`points` file run with `--seed-offset K`: K added to the spec's seed), the Monte Carlo error bar of a curve;
the errors' changes are printed in units of their combined standard errors (zplug, zbayes).
`sweep` times `seqphase run smi-2layer-se --workers W` into a fresh temporary store (the wall time from the
cluster start to the last point stored, and the CPU seconds summed over the points' `runtime_s`).
The recorded runs the docs compare are in benchmarks/data/smi_se_speed/ (its README says which code made each).
`posterior` records the 2-layer posterior's calls (labels, cavities, V) of the SE at the given alphas, then
times each call again (CPU seconds, the minimum of `--repeat` runs) and prints the milliseconds per sample.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import harness

FIELDS = ("gen_error_plugin", "gen_error_bayes", "gen_error_plugin_se", "gen_error_bayes_se")


def points(out_path, alphas, overrides, seed_offset):
    from seqphase.core.models import run_point
    from seqphase.sweeps.planner import seed_key
    from seqphase.sweeps.spec import load_sweep

    sweep = load_sweep("smi-2layer-se", overrides)
    grid = [float(a) for a in sweep.params["alpha"]]
    chosen = grid if alphas is None else [min(grid, key=lambda g: abs(g - a)) for a in alphas]
    harness.writable(out_path)  # refused before the run, not after it
    harness.print_machine()
    rows = []
    for alpha in chosen:
        params = {"alpha": alpha, "skip": float(sweep.params["skip"][0]), "depth": 2}
        started = time.process_time()
        out = run_point("smi", "se", params, dict(sweep.settings), sweep.seed + seed_offset, seed_key(params))
        cpu = time.process_time() - started
        row = {"alpha": alpha, "cpu_s": cpu, "n_iter": int(out["n_iter"]), "n_coarse": int(out["n_iter_coarse"]),
               "converged": int(out["converged"]), "q11": float(out["overlap"][0, 0]),
               "q22": float(out["overlap"][1, 1]), "q12": float(out["overlap"][0, 1]),
               **{k: float(out[k]) for k in FIELDS}}
        rows.append(row)
        print(f"{alpha:7.4f} {cpu:7.2f} s {row['n_coarse']:4d} + {row['n_iter'] - row['n_coarse']:4d} it "
              f"Q11 {row['q11']:.5f} Q22 {row['q22']:.5f} conv {row['converged']}", flush=True)
    print(f"total CPU {sum(r['cpu_s'] for r in rows):.1f} s over {len(rows)} points")
    harness.write_json(out_path, {"overrides": overrides, "seed_offset": seed_offset, "rows": rows}, indent=1)
    print(f"written to {out_path}")


def posterior(alphas, repeat):
    import seqphase.core.smi.channels as channels
    from seqphase.core.models import run_point
    from seqphase.sweeps.planner import seed_key
    from seqphase.sweeps.spec import load_sweep

    harness.print_machine()
    kernel = channels.posterior_2layer
    calls = []

    def recording(*args):
        calls.append(args)
        return kernel(*args)

    sweep = load_sweep("smi-2layer-se", [])
    grid = [float(a) for a in sweep.params["alpha"]]
    channels.posterior_2layer = recording
    try:
        for alpha in alphas:
            params = {"alpha": min(grid, key=lambda g: abs(g - alpha)), "skip": float(sweep.params["skip"][0]),
                      "depth": 2}
            run_point("smi", "se", params, dict(sweep.settings), sweep.seed, seed_key(params))
    finally:
        channels.posterior_2layer = kernel
    cpu = 0.0
    for args in calls:
        best = np.inf
        for _ in range(repeat):
            started = time.process_time()
            kernel(*args)
            best = min(best, time.process_time() - started)
        cpu += best
    samples = sum(args[0].shape[0] for args in calls)
    print(f"{len(calls)} calls, {samples} samples: {1e3 * cpu / samples:.4f} ms per sample (CPU, min of {repeat})")


def _load(path):
    with open(path) as f:
        return {round(r["alpha"], 6): r for r in json.load(f)["rows"]}


def _z(before, after, name):
    """The change of an error in units of the two runs' Monte Carlo standard errors combined."""
    return (after[name] - before[name]) / np.hypot(before[name + "_se"], after[name + "_se"])


def compare(before_path, after_path, seed_paths):
    before, after = _load(before_path), _load(after_path)
    seeds = [_load(p) for p in seed_paths]
    print(f"{'alpha':>7s} {'Q11 before':>10s} {'Q11 after':>10s} {'dQ11':>8s} {'sdQ11':>7s} {'Q22 before':>10s} "
          f"{'Q22 after':>10s} {'dQ22':>8s} {'sdQ22':>7s} {'zplug':>6s} {'zbayes':>6s} {'cpu b':>6s} {'cpu a':>6s}")
    for a in sorted(set(before) & set(after)):
        b, x = before[a], after[a]
        sd = {}
        for q in ("q11", "q22"):
            vals = [b[q]] + [s[a][q] for s in seeds if a in s]
            sd[q] = float(np.std(vals, ddof=1)) if len(vals) > 1 else np.nan
        print(f"{a:7.4f} {b['q11']:10.5f} {x['q11']:10.5f} {x['q11'] - b['q11']:+8.5f} {sd['q11']:7.4f} "
              f"{b['q22']:10.5f} {x['q22']:10.5f} {x['q22'] - b['q22']:+8.5f} {sd['q22']:7.4f} "
              f"{_z(b, x, 'gen_error_plugin'):+6.2f} {_z(b, x, 'gen_error_bayes'):+6.2f} {b['cpu_s']:6.1f} "
              f"{x['cpu_s']:6.1f}")
    common = sorted(set(before) & set(after))
    print(f"total CPU before {sum(before[a]['cpu_s'] for a in common):.1f} s, "
          f"after {sum(after[a]['cpu_s'] for a in common):.1f} s")


def sweep(workers, overrides):
    import xarray as xr

    with tempfile.TemporaryDirectory() as folder:
        store = os.path.join(folder, "bench.zarr")
        cmd = [sys.executable, "-m", "seqphase.cli", "run", "smi-2layer-se", "--workers", str(workers), "--store",
               store, "--no-progress"] + [x for o in overrides for x in ("--set", o)]
        harness.print_machine()
        started = time.perf_counter()
        usage0 = os.times()
        subprocess.run(cmd, check=True)
        wall = time.perf_counter() - started
        usage1 = os.times()
        children_cpu = (usage1.children_user + usage1.children_system) - (usage0.children_user + usage0.children_system)
        ds = xr.open_zarr(store, group="smi-2layer-se")
        point_cpu = float(ds["runtime_s"].sum())
        print(f"workers {workers}: wall {wall:.1f} s, CPU of the command and its workers {children_cpu:.1f} s, "
              f"points' runtime_s summed {point_cpu:.1f} s")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("points")
    p.add_argument("out", nargs="?", type=Path, default=harness.out_path("smi_se_speed", "points.json"),
                   help="the JSON file written (default: benchmarks/out/smi_se_speed/points.json)")
    p.add_argument("--alphas", default=None, help="comma-separated alphas (nearest grid points; default: all 48)")
    p.add_argument("--set", action="append", default=[], dest="overrides")
    p.add_argument("--seed-offset", type=int, default=0, help="added to the spec's seed: independent streams")
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    c.add_argument("--seeds", action="append", default=[], help="points files of other seeds (repeatable)")
    s = sub.add_parser("sweep")
    s.add_argument("--workers", type=int, default=2)
    s.add_argument("--set", action="append", default=[], dest="overrides")
    k = sub.add_parser("posterior")
    k.add_argument("--alphas", default="0.8,1.0,1.3", help="comma-separated alphas (nearest grid points)")
    k.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if args.mode == "points":
        alphas = None if args.alphas is None else [float(a) for a in args.alphas.split(",")]
        points(args.out, alphas, args.overrides, args.seed_offset)
    elif args.mode == "posterior":
        posterior([float(a) for a in args.alphas.split(",")], args.repeat)
    elif args.mode == "compare":
        compare(args.before, args.after, args.seeds)
    else:
        sweep(args.workers, args.overrides)
    return 0


if __name__ == "__main__":
    sys.exit(main())
