"""A part of one `smi-thresholds-gamp` point, run by the sweep's own works: the instances of one transition at
some of the sweep's sizes, for the evidence tables of docs/validation/smi.md before the whole point has been run.

    python benchmarks/smi_onset.py [--logs DIR] run --skip 0.1 --transition alpha1 --sizes 250,500 [--seeds 16,8] [--workers 2]
    python benchmarks/smi_onset.py table --skip 0.1 --transition alpha1 [--log FILE | --store STORE] [--markdown]
    python benchmarks/smi_onset.py parts --skip 0.1 --store STORE
    python benchmarks/smi_onset.py log --skip 0.1 --store STORE
    python benchmarks/smi_onset.py design --skip 0.1 --store STORE --sizes 3 --seeds 8
    python benchmarks/smi_onset.py cap --skip 1 --transition alpha1 --size 2000 --steps 2,3 --max-iter 450 --store STORE
        [--seeds N] [--tol-strip 1e-6]
    python benchmarks/smi_onset.py trace --skip 2 --transition alpha1 --size 1000 --step 3 --seed 8 [--out FILE]

`run` plans the shipped sweep at that skip (`--set` overrides as for `seqphase run`), takes the point's
works (`OnsetMethod.tasks`: one GAMP instance per size, alpha and seed, each its own child of the point's
SeedSequence) whose transition and size are asked for, and runs them in a process pool, smallest size
first, one BLAS thread a process. Every finished instance is appended to
LOGS/smi-c<skip>-<transition>-v<onset method version>.jsonl as it arrives (key, final overlaps, iterations,
CPU-s), so an interrupted run keeps what it did, and a rerun skips the keys already there. The values are
those the whole sweep point computes for the same keys: same streams, same settings.

`--seeds N1,N2,...` runs only seeds 0 .. N-1 of each alpha at each size (a cheaper look at a large size); the
instances run size by size, and seed by seed across the window, so a run cut short leaves whole seeds.
`table` applies the onset rule (core/onset.py, the sweep's level and correction) to every size, on the seeds 0 .. n-1 that all
its alphas have: the mean overlap per alpha, the per-size onset +- its bootstrap s.e., and the
extrapolation d -> infinity over those sizes. With `--store` it reads the sweep's point in that store instead
of a log: the stored instances once the point is done, else the works the sweep has finished so far (its parts,
results/parts.py): a look at a point still running, with each size's cost as its works kept it (s of work, the
sum of their one-thread workers' wall times, as the stored runtime_s). `--markdown` prints the table of
docs/validation/smi.md (mean overlap and the instances above the level per alpha, the onset per size).
`parts` hands the instances of both transitions' logs at that skip to `seqphase run smi-thresholds-gamp
--store STORE` as finished works of the point (results/parts.py, under the point's hash), so the sweep runs
only the works not run here. It first reruns the smallest-size instance of each log through the point's
own work and refuses (exit 1, nothing written) unless the logged overlaps are reproduced bit for bit:
the log then belongs to this point, its settings and its method version.
`log` is its inverse: it appends the works a store keeps for a point still running (its parts) to the
transitions' logs as `run` writes them (each work's kept time as cpu_s), so a point too long for one machine's
lease travels as text: `log` where it ran, `parts` where it resumes. A key already in a log with other values
is refused (exit 1, nothing written).
`design` reads a cheaper design off a point in a store: the rule on its first N sizes and first M seeds (the
very instances `--set sizes=... --set n_seeds=M` runs), the estimates under every correction beside the whole
point's, and the design's share of the cost.
`cap` asks whether the sweep's iteration cap (max_iter) moves the onset at one size: it reruns the stored
instances of some alphas of that size (`--seeds N`: seeds 0 .. N-1) to a larger cap, on the same streams (an
instance's stream does not depend on max_iter, so each rerun passes through the stored run bit for bit: the
largest difference at the stored iteration is printed, <= 5e-7 from the log's 6 decimals), logs each run's
|M_ll| per iteration to
LOGS/smi-c<skip>-<transition>-d<d>-cap<N>-v<version>.jsonl (resumable like `run`), and prints
per alpha the mean and the instances above the level at the sweep's cap and at the larger one, how many met the
tolerance, how many still move after the sweep's cap (range of |M_ll| after it above the level), and the onset
at that size both ways. `--tol-strip T` reruns with the posterior's error tolerance in strip coordinates (skips
below ~0.4; that of the point's `posterior` grid otherwise: 1e-2 for 'coarse', 1e-4 for 'fine') at T, logs to ...-cap<N>-tol<T>-v<version>.jsonl, and prints the largest
difference of |M_ll| from the same instances in the default tolerance's cap logs (any cap; their common
iterations): whether a trajectory is GAMP's own or the grid's error.
`trace` runs one instance of the point (its transition, size, alpha step and seed; the grid design, no early
stop, to the cap) and prints every layer's |M_ll| per iteration (4 significant digits: an overlap near zero
keeps its shape) as JSON, to `--out` if given:
the trajectories the stopping rule's tests replay (tests/data/smi/onset-escape-c2-d1000.json).

LOGS is `--logs DIR`, given before the command (default benchmarks/out/onset/). The logs that
docs/validation/smi.md and docs/validation/onset.md cite are in benchmarks/data/onset/: read them with
`table --log FILE`, or with `--logs benchmarks/data/onset` for the commands that only read (`table`, `parts`);
the commands that write (`run`, `cap`, `log`) refuse that folder.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy: a BLAS thread pool per process only fights the other processes

import numpy as np

import harness
from seqphase.core import onset
from seqphase.core.smi.channels import RESOLUTIONS

OUT = harness.out_path("onset")  # the folder of the logs (--logs)
SWEEP = "smi-thresholds-gamp"


#: The script works on the grid design (every alpha of each window at every size, runs to tol or the cap):
#: its works are known before any runs, which `run`, `parts` and `cap` need. A user's --set comes after these.
GRID = ["design=grid", "stop_window=0"]


def point(skip, overrides):
    """(method, params, settings, the point's SeedSequence, its hash) of the sweep's grid point at `skip`
    (`GRID`)."""
    from seqphase.core.models import point_stream
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    plan = plan_sweep(load_sweep(SWEEP, [f"skip={skip:g}"] + GRID + list(overrides)))
    (pt,) = plan.points
    params, settings = plan.point_inputs(pt)
    return plan.model.method("onset"), params, settings, point_stream(plan.sweep.seed, pt.seed_key), pt.hash


def log_path(skip, transition):
    """The log of one transition at one skip, named with the onset method's version: a log made by other
    code is never resumed or read as this version's."""
    from seqphase.core.models import get_model

    version = get_model("smi").method("onset").version
    return OUT / f"smi-c{skip:g}-{transition}-v{version}.jsonl"


def _work(work):
    start = time.process_time()
    out = work.fn(**work.kwargs)
    return work.key, out, time.process_time() - start


def _log_row(key, result, seconds=None):
    """One line of a transition's log: the work's key, its result's values as floats and its time (cpu_s; none
    where unknown). `parts` reads it back with the work's own types."""
    row = {"key": key, **{n: float(v) for n, v in result.items()}}
    if seconds is not None:
        row["cpu_s"] = float(seconds)
    return row


def _logged(workers, path, calls, row):
    """Run calls [(fn, *args)] in a pool of `workers` processes; as each finishes, append row(its result) to the
    JSON-lines log at `path` (flushed, so a run cut short keeps what finished) and yield it."""
    with ProcessPoolExecutor(workers) as pool, open(harness.writable(path), "a") as fh:
        for fut in as_completed([pool.submit(*call) for call in calls]):
            done = row(fut.result())
            fh.write(json.dumps(done) + "\n")
            fh.flush()
            yield done


def run(skip, transition, sizes, workers, overrides, seeds=None):
    method, params, settings, stream, _ = point(skip, overrides)
    works = next(method.tasks(params, settings, stream))
    # seeds: per size, only its first seeds of each alpha (keys ending in -s0 ... -s<seeds-1>)
    seeds = dict(zip(sizes, seeds or [settings["n_seeds"]] * len(sizes)))
    path = log_path(skip, transition)
    have = harness.rows_by_key(path)
    # smallest size first, then seed by seed across the window, so a run cut short leaves whole seeds
    todo = []  # (order, work)
    for w in works:
        t, d, step, seed = onset.parse_instance_key(w.key)
        if t == transition and w.key not in have and d in seeds and seed < seeds[d]:
            todo.append(((sizes.index(d), seed, step), w))
    todo = [w for _, w in sorted(todo, key=lambda pair: pair[0])]
    print(f"skip {skip:g} {transition}: {len(todo)} instances to run ({len(have)} already there), sizes {sizes}",
          flush=True)
    started, cpu = time.time(), 0.0

    # submitted in order: smallest size first; each result (key, out, seconds) logged as it arrives
    for k, done in enumerate(_logged(workers, path, [(_work, w) for w in todo], lambda done: _log_row(*done)), 1):
        cpu += done["cpu_s"]
        if k % 16 == 0:
            print(f"  {k}/{len(todo)} in {time.time() - started:.0f} s wall, {cpu:.0f} CPU-s", flush=True)
    print(f"done: {len(todo)} instances, {time.time() - started:.0f} s wall, {cpu:.0f} CPU-s", flush=True)


def stored_rows(skip, store, overrides):
    """({work key: result}, stored) of the sweep's point at `skip` in `store`: its stored instances when the
    point is done (stored: {transition: its per-size onsets and s.e. as the sweep computed them}), else the
    works finished so far (the point's parts; stored None)."""
    from seqphase.core.errors import SeqphaseError
    from seqphase.results.parts import Parts
    from seqphase.results.query import open_results
    from seqphase.results.store import DONE

    method, _, settings, _, point_hash = point(skip, overrides)
    try:
        ds = open_results(SWEEP, store)
    except SeqphaseError:  # the sweep is not in the store yet: its parts may be
        ds = None
    at = ds.sel(skip=skip).squeeze(drop=True) if ds is not None and skip in ds["skip"].values else None
    if at is None or int(at["status"]) != DONE or str(at["point_hash"].values) != point_hash:
        # a running point: its finished works, each with the time it took ("work_s": the wall time of its
        # one-thread worker, as the point's runtime_s sums them; absent where a work kept no metadata)
        rows = {}
        for key, kept in Parts(store, SWEEP).load_kept(point_hash).items():
            rows[key] = dict(kept.result)
            if kept.meta and "runtime_s" in kept.meta:
                rows[key]["work_s"] = float(kept.meta["runtime_s"])
        return rows, None
    rows, stored = {}, {}
    for t, alphas in method.windows(settings).items():
        for si, d in enumerate(settings["sizes"]):
            for j in range(len(alphas)):
                for s in range(settings["n_seeds"]):
                    rows[onset.instance_key(t, d, j, s)] = {
                        k: float(at[f"{t}_{k}"].values[si, j, s]) for k in (*method.observables, "n_iter")}
        stored[t] = (at[f"{t}_gamp_d"].values, at[f"{t}_gamp_d_se"].values)
    return rows, stored


def table(skip, transition, overrides, log=None, store=None, markdown=False):
    method, params, settings, _, _ = point(skip, overrides)
    alphas = method.windows(settings)[transition]
    observable = method.transitions[transition]
    stored = None
    if store:
        if _bad_store(store):  # a missing or foreign store: one line, exit 2 (not an empty table)
            return 2
        rows, stored = stored_rows(skip, store, overrides)
        if not rows:
            print(f"smi_onset.py: {store} holds no instance of {SWEEP} at skip {skip:g} (fix: seqphase run {SWEEP} "
                  f"--set skip={skip:g} --store {store}, or give the --set values it ran with)", file=sys.stderr)
            return 2
    else:
        rows = harness.rows_by_key(Path(log) if log else log_path(skip, transition))
    rng = np.random.default_rng(0)  # the bootstrap's; a stored point's onsets are printed as stored
    sizes, onsets, ses = [], [], []
    if markdown:
        layer = observable[-1]
        print(f"| {transition[:-1]}_{transition[-1]}, \\|M{layer}{layer}\\| at d | "
              + " | ".join(f"{a:.2f}" if transition == "alpha2" else f"{a:.1f}" for a in alphas) + " | onset at d |")
        print("|" + "---|" * (len(alphas) + 2))
    for d in settings["sizes"]:
        # the seeds 0 .. n-1 that every alpha of this size has (a size may have been run on fewer seeds)
        n = next((n for n in range(settings["n_seeds"], 1, -1)
                  if all(onset.instance_key(transition, d, j, s) in rows
                         for j in range(len(alphas)) for s in range(n))), 0)
        if not n:
            continue
        keys = [[onset.instance_key(transition, d, j, s) for s in range(n)] for j in range(len(alphas))]
        obs = np.array([[rows[k][observable] for k in row] for row in keys])
        above = [int((o > settings["level"] / np.sqrt(d)).sum()) for o in obs]
        if stored:
            index = list(settings["sizes"]).index(d)
            value, se = float(stored[transition][0][index]), float(stored[transition][1][index])
        else:
            try:
                value, se = onset.onset_at_size(alphas, obs, d, level=settings["level"], rng=rng)
            except onset.OnsetWindowError as exc:
                value, se = np.nan, str(exc)
        if markdown:
            cell = f"{value:.3f} +- {se:.3f}" if np.isfinite(value) else se
            print(f"| {d} | " + " | ".join(f"{m:.3f} ({a}/{n})" for m, a in zip(obs.mean(axis=1), above))
                  + f" | {cell} |")
        else:
            cpu = sum(rows[k].get("cpu_s", np.nan) for row in keys for k in row)  # a log's instances
            work = sum(rows[k].get("work_s", np.nan) for row in keys for k in row)  # a running point's works
            cost = (f" ({cpu:.0f} CPU-s)" if np.isfinite(cpu) else f" ({work:.0f} s of work)" if np.isfinite(work)
                    else "")
            print(f"d = {d:5d}, {n} seeds" + cost + f": mean {observable} "
                  + " ".join(f"{a:.2f}: {m:.3f}" for a, m in zip(alphas, obs.mean(axis=1))))
            print("          instances above the level: " + " ".join(f"{a}/{n}" for a in above))
            print(f"          onset {value:.3f} +- {se:.3f}" if np.isfinite(value) else f"          {se}")
        if transition == "alpha2" and not markdown:
            # the alpha_2 window's |M11|: GAMP's layer 1 below alpha = 0.5 (the published small-skip alpha_1)
            m11 = np.array([[rows[k]["overlap_1"] for k in row] for row in keys])
            print(f"          (|M11| in this window: largest {m11.max():.3f}, largest mean {m11.mean(axis=1).max():.3f})")
        if np.isfinite(value):
            sizes.append(d), onsets.append(value), ses.append(se)
    if not sizes:
        print(f"no size has all {len(alphas)} alphas of {transition} on two seeds or more yet")
    if len(sizes) >= 2:
        for correction in onset.CORRECTIONS:
            inf, se, chi2 = onset.extrapolate(sizes, onsets, ses, correction)
            print(f"{correction:7s} d = {sizes[0]}-{sizes[-1]}: {inf:.3f} +- {se:.3f} (chi2 {chi2:.2f})")
    return 0


def design(skip, store, n_sizes, n_seeds, overrides):
    """What a cheaper design would have given: the onset rule on the first `n_sizes` sizes and seeds 0 ..
    n_seeds - 1 of the sweep's point at `skip` in `store` (done, or its finished works), beside the whole point.
    The instances of `--set sizes=<the first n_sizes sizes> --set n_seeds=<n_seeds>` are these very draws (an
    instance's stream is keyed by its size's index and its seed, core/onset.py), so this is that run's result up
    to the bootstrap's resamples. Cost: the design's share of the point's sample-iterations (alpha d n_iter
    summed; the cost per sample-iteration is one number per skip), and its seconds of work where the works'
    times are kept (a point still running): runtime_s, each work's wall time on its one-thread worker, CPU-s where
    the worker had its core to itself."""
    from seqphase.results.parts import Parts

    method, _, settings, _, point_hash = point(skip, overrides)
    sizes = list(settings["sizes"])
    if not 2 <= n_sizes <= len(sizes) or not 2 <= n_seeds <= settings["n_seeds"]:  # before reading the store
        print(f"smi_onset.py: --sizes {n_sizes} / --seeds {n_seeds} out of range (fix: 2..{len(sizes)} sizes, "
              f"2..{settings['n_seeds']} seeds)", file=sys.stderr)
        return 2
    if _bad_store(store):
        return 2
    rows, stored = stored_rows(skip, store, overrides)
    kept = {} if stored else Parts(store, SWEEP).load_kept(point_hash)
    windows = method.windows(settings)
    cost = {}  # label -> [sample-iterations, s of work of the kept works (their runtime_s)]
    designs = ((f"first {n_sizes} sizes, {n_seeds} seeds", n_sizes, n_seeds),
               ("whole point", len(sizes), settings["n_seeds"]))  # (the whole point: this bootstrap's s.e.)
    for label, nd, ns in designs:
        keys = {t: [[[onset.instance_key(t, d, j, s) for s in range(ns)] for j in range(len(alphas))]
                    for d in sizes[:nd]] for t, alphas in windows.items()}
        missing = [k for t in keys for size in keys[t] for row in size for k in row if k not in rows]
        if missing and nd < len(sizes):
            print(f"smi_onset.py: {len(missing)} instances of this design are not in {store} yet "
                  f"(e.g. {missing[0]}): let the point run further", file=sys.stderr)
            return 2
        if missing:  # a point still running: the design alone
            print(f"{label}: not complete yet ({len(missing)} instances to go)")
            continue
        line, cost[label] = [], [0.0, 0.0]
        for t, alphas in windows.items():
            rng = np.random.default_rng(0)
            obs = [np.array([[rows[k][method.transitions[t]] for k in row] for row in size]) for size in keys[t]]
            onsets, ses = onset.onsets_by_size(alphas, obs, sizes[:nd], level=settings["level"], rng=rng)
            fits = [onset.extrapolate(sizes[:nd], onsets, ses, c) for c in onset.CORRECTIONS]
            line.append(f"{t} " + " / ".join(f"{v:.3f} +- {e:.3f}" for v, e, _ in fits))
            for si, size in enumerate(keys[t]):
                for j, row in enumerate(size):
                    for k in row:
                        cost[label][0] += alphas[j] * sizes[si] * rows[k]["n_iter"]
                        if k in kept and kept[k].meta:
                            cost[label][1] += kept[k].meta["runtime_s"]
        print(f"{label} ({' / '.join(onset.CORRECTIONS)}): " + "; ".join(line))
    (mine, _, _), (whole, _, _) = designs
    timed = f"{cost[mine][1]:.0f} s of work of the kept works" if cost[mine][1] else ""
    if whole in cost:
        share = f"{cost[mine][0] / cost[whole][0]:.3f} of the point's sample-iterations"
        timed = f"{share}; {cost[mine][1]:.0f} of {cost[whole][1]:.0f} s of work of the kept works" if timed else share
    print(f"cost: {timed or 'no kept times (a stored point)'}")
    return 0


def _trajectory(method, work, layer, resolution=None):
    """(key, |M_ll| per iteration (0 = the start), iterations, converged, CPU-s) of one instance of the point:
    the trace of the very run the work makes (`Onset.trace`), or of that run with the channel's grid settings
    replaced by `resolution`."""
    start = time.process_time()
    tr = method.trace(**work.kwargs, resolution=resolution)
    path = np.round(np.abs(np.asarray(tr.overlap)[:, layer, layer]), 6)  # 6 decimals: the log stays small
    return work.key, path.tolist(), int(tr.n_iter), int(bool(tr.converged)), time.process_time() - start


def cap(skip, transition, d, steps, max_iter, store, n_seeds, workers, overrides, tol_strip=None):
    """The sweep's iteration cap against a larger one at size d (module docstring); with `tol_strip`, the
    posterior's error tolerance in strip coordinates replaced too."""
    method, _, settings, _, _ = point(skip, overrides)
    alphas = method.windows(settings)[transition]
    observable = method.transitions[transition]
    n_seeds = settings["n_seeds"] if n_seeds is None else n_seeds
    checks = (  # (wrong, the line that says so), the first wrong one is reported
        (d not in settings["sizes"], f"--size {d} is not one of the sweep's sizes {list(settings['sizes'])}"),
        (not steps or any(not 0 <= j < len(alphas) for j in steps),
         f"--steps {steps}: the {transition} window has steps 0..{len(alphas) - 1}"),
        (max_iter <= settings["max_iter"],
         f"--max-iter {max_iter} is not above the sweep's max_iter {settings['max_iter']}"),
        (not 1 <= n_seeds <= settings["n_seeds"], f"--seeds {n_seeds}: give 1..{settings['n_seeds']}"),
        (tol_strip is not None and not tol_strip > 0,
         f"--tol-strip {tol_strip}: give a tolerance > 0 (the point's is "
         f"{RESOLUTIONS[settings['posterior']].tol_strip:g})"),
    )
    bad = next((line for wrong, line in checks if wrong), None)
    if bad:
        print(f"smi_onset.py: {bad}", file=sys.stderr)
        return 2
    if _bad_store(store):
        return 2
    rows, _ = stored_rows(skip, store, overrides)
    keys = [[onset.instance_key(transition, d, j, s) for s in range(n_seeds)] for j in range(len(alphas))]
    missing = [k for row in keys for k in row if k not in rows]
    if missing:
        print(f"smi_onset.py: {len(missing)} instances at d = {d} are not in {store} yet (e.g. {missing[0]}): let "
              "the point run further", file=sys.stderr)
        return 2
    longer, params, longer_settings, stream, _ = point(skip, list(overrides) + [f"max_iter={max_iter}"])
    works = {w.key: w for w in next(longer.tasks(params, longer_settings, stream))}
    version = longer.version
    resolution = None if tol_strip is None else replace(RESOLUTIONS[settings["posterior"]], tol_strip=tol_strip)
    tol = "" if tol_strip is None else f"-tol{tol_strip:g}"
    path = OUT / f"smi-c{skip:g}-{transition}-d{d}-cap{max_iter}{tol}-v{version}.jsonl"
    have = harness.rows_by_key(path)
    layer = int(observable[-1]) - 1  # overlap_1 -> M11
    todo = [works[keys[j][s]] for s in range(n_seeds) for j in steps if keys[j][s] not in have]  # seed by seed

    def row(result):
        key, trajectory, n_iter, converged, seconds = result
        return {"key": key, "trajectory": trajectory, "n_iter": n_iter, "converged": converged, "cpu_s": seconds}

    for done in _logged(workers, path, [(_trajectory, longer, w, layer, resolution) for w in todo], row):
        have[done["key"]] = done
    level = settings["level"] / np.sqrt(d)
    old = np.array([[rows[k][observable] for k in row] for row in keys])
    new = old.copy()
    # the rerun at the stored run's last iteration is the stored value (same stream, same code; to the log's
    # 6 decimals)
    replay = max(abs(have[keys[j][s]]["trajectory"][int(rows[keys[j][s]]["n_iter"])] - old[j, s])
                 for j in steps for s in range(n_seeds))
    print(f"skip {skip:g}, {transition}, d = {d}, seeds 0..{n_seeds - 1}: cap {settings['max_iter']} -> {max_iter}"
          + ("" if tol_strip is None else f", tol_strip {tol_strip:g}")
          + f"; level {level:.4f}; rerun at the stored iteration: largest difference {replay:.1e}")
    if tol_strip is not None:
        _against_default_tolerance(path, have, [keys[j][s] for j in steps for s in range(n_seeds)])
    for j in steps:
        runs = [have[keys[j][s]] for s in range(n_seeds)]
        new[j] = [r["trajectory"][-1] for r in runs]
        moving = sum(np.ptp(r["trajectory"][settings["max_iter"]:] or [0.0]) > level for r in runs)
        print(f"alpha {alphas[j]:.3f}: mean {old[j].mean():.3f} ({(old[j] > level).sum()}/{n_seeds} above) -> "
              f"{new[j].mean():.3f} ({(new[j] > level).sum()}/{n_seeds}); {sum(r['converged'] for r in runs)} "
              f"met the tolerance by {max_iter}; {moving} moved by more than the level after iteration "
              f"{settings['max_iter']}")
    for label, obs in ((f"cap {settings['max_iter']}", old), (f"cap {max_iter} at these alphas", new)):
        try:
            value, se = onset.onset_at_size(alphas, obs, d, level=settings["level"], rng=np.random.default_rng(0))
            print(f"onset at d = {d}, {label}: {value:.4f} +- {se:.4f}")
        except onset.OnsetWindowError as exc:
            print(f"onset at d = {d}, {label}: {exc}")
    return 0


def _against_default_tolerance(path, have, keys):
    """Print how far the trajectories in `have` (a --tol-strip rerun) lie from the same instances' trajectories
    in the cap logs of the default tolerance beside `path` (any cap), over their common iterations."""
    stem = path.name.split("-cap")[0]
    for other in sorted(path.parent.glob(f"{stem}-cap*-v*.jsonl")):
        if "-tol" in other.name:
            continue
        rows = harness.rows_by_key(other)
        common = [k for k in keys if k in rows]
        if not common:
            continue
        gaps = {}
        for k in common:
            n = min(len(rows[k]["trajectory"]), len(have[k]["trajectory"]))
            gaps[k] = (max(abs(a - b) for a, b in zip(rows[k]["trajectory"][:n], have[k]["trajectory"][:n])), n - 1)
        worst = max(gaps, key=lambda k: gaps[k][0])
        print(f"against the default tolerance ({other.name}, {len(common)} instances): largest |M_ll| difference "
              f"{gaps[worst][0]:.1e} ({worst}, iterations 0..{gaps[worst][1]})")


def _bad_store(store):
    """One line and True for a missing or foreign store (the caller exits 2)."""
    from seqphase.core.errors import StoreError
    from seqphase.results.store import Store

    try:
        Store(store).check()
    except StoreError as exc:
        print(f"smi_onset.py: {exc}", file=sys.stderr)
        return True
    return False


def parts(skip, store, overrides):
    from seqphase.results.parts import Parts
    from seqphase.results.store import Store

    method, params, settings, stream, point_hash = point(skip, overrides)
    works = {w.key: w for w in next(method.tasks(params, settings, stream))}
    rows = {}
    for transition in method.transitions:
        path = log_path(skip, transition)
        logged = harness.rows_by_key(path)
        if not logged:
            continue
        foreign = sorted(set(logged) - set(works))
        if foreign:
            print(f"{path}: {len(foreign)} keys are not works of this point "
                  f"(e.g. {foreign[0]}): nothing written", file=sys.stderr)
            return 1
        key = min(logged, key=lambda k: onset.parse_instance_key(k)[1:])  # smallest size, first alpha and seed
        _, out, _ = _work(works[key])
        if any(float(out[k]) != logged[key][k] for k in out):
            print(f"{key}: the logged values {({k: logged[key][k] for k in out})} are not reproduced ({out}): "
                  "the log was made under other settings or another method version; nothing written",
                  file=sys.stderr)
            return 1
        rows.update(logged)
        types = {k: type(v) for k, v in out.items()}  # the work's own result: its keys and types
    if not rows:
        print(f"no log of this version at skip {skip:g} ({log_path(skip, 'alpha1').name}, ...): run `smi_onset.py "
              "run` first; nothing written", file=sys.stderr)
        return 1
    Store(store).check(create=True)  # a new store, or one of seqphase's (StoreError otherwise)
    kept = Parts(store, SWEEP)
    for key, row in rows.items():
        # the logged CPU time is the work's runtime (one process per instance); a log without it: unknown
        meta = {"runtime_s": float(row["cpu_s"]), "host": "smi_onset.py"} if "cpu_s" in row else None
        kept.save(point_hash, key, {k: cast(row[k]) for k, cast in types.items()}, meta)
    print(f"{len(rows)} of the point's {len(works)} works handed to {store} (point {point_hash[:12]}); "
          f"{len(works) - len(rows)} left for `seqphase run {SWEEP} --set skip={skip:g} --store {store}`")
    return 0


def log(skip, store, overrides):
    """The inverse of `parts`: write the works a store keeps for the point (a point still running) to the
    transitions' logs, each as `run` logs it (its result's values as floats, its kept time as cpu_s), so the
    point's finished works travel as text to another machine, where `parts` hands them to that store's sweep."""
    from seqphase.results.parts import Parts

    if _bad_store(store):
        return 2
    _, _, _, _, point_hash = point(skip, overrides)
    kept = Parts(store, SWEEP).load_kept(point_hash)
    if not kept:
        print(f"{store} keeps no finished work of the point at skip {skip:g} (point {point_hash[:12]}): a point "
              "not started, or already stored; nothing written", file=sys.stderr)
        return 1
    rows = {}  # transition -> [row], in the order of the instance keys
    for parsed, key in sorted((onset.parse_instance_key(key), key) for key in kept):
        meta = kept[key].meta or {}
        rows.setdefault(parsed[0], []).append(_log_row(key, kept[key].result, meta.get("runtime_s")))
    logged = {t: harness.rows_by_key(log_path(skip, t)) for t in rows}
    for transition, batch in rows.items():  # a key already logged must say the same, or nothing is written
        for row in batch:
            have = logged[transition].get(row["key"])
            if have is not None and any(have.get(n) != v for n, v in row.items() if n != "cpu_s"):
                print(f"{log_path(skip, transition)}: {row['key']} is logged with other values ({have}) than the "
                      f"store keeps ({row}); nothing written", file=sys.stderr)
                return 1
    written = 0
    for transition, batch in rows.items():
        path = log_path(skip, transition)
        fresh = [row for row in batch if row["key"] not in logged[transition]]
        harness.append_jsonl(path, fresh)
        written += len(fresh)
        print(f"{path.name}: {len(fresh)} works written ({len(batch) - len(fresh)} already there)")
    print(f"{written} of the {len(kept)} works {store} keeps for point {point_hash[:12]} logged; on another machine "
          f"`python benchmarks/smi_onset.py parts --skip {skip:g} --store STORE` hands them to its sweep")
    return 0


def trace(skip, transition, d, step, seed, overrides, out=None):
    """One instance's |M_ll| per iteration, every layer, no early stop (module docstring)."""
    method, params, settings, stream, _ = point(skip, overrides)
    key = onset.instance_key(transition, d, step, seed)
    works = {w.key: w for w in next(method.tasks(params, settings, stream))}
    if key not in works:
        print(f"smi_onset.py: no instance {key} in the point (fix: a size of {list(settings['sizes'])}, a step "
              f"0..{len(method.windows(settings)[transition]) - 1} and a seed 0..{settings['n_seeds'] - 1})",
              file=sys.stderr)
        return 2
    tr = method.trace(**works[key].kwargs)
    layers = np.abs(np.diagonal(np.asarray(tr.overlap), axis1=1, axis2=2))  # (iterations + 1, layers)
    text = json.dumps({"skip": skip, "key": key, "alpha": float(method.windows(settings)[transition][step]),
                       "d": d, "level": settings["level"], "cap": settings["max_iter"],
                       **{f"m{i + 1}{i + 1}": [float(f"{x:.4g}") for x in layers[:, i]] for i in range(layers.shape[1])}})
    if out:
        harness.write_text(out, text + "\n")
    else:
        print(text)
    return 0


def main(argv=None):
    global OUT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", type=Path, default=OUT, help="the folder of the logs (default: benchmarks/out/onset)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "table", "parts", "log", "design", "cap", "trace"):
        p = sub.add_parser(name)
        p.add_argument("--skip", type=float, required=True)
        if name == "parts":
            p.add_argument("--store", required=True, help="the zarr store `seqphase run` will write")
        elif name == "log":
            p.add_argument("--store", required=True, help="the store whose sweep is running the point")
        elif name == "design":
            p.add_argument("--store", required=True, help="the store holding the sweep's point")
            p.add_argument("--sizes", type=int, required=True, help="how many of the sweep's sizes, from the smallest")
            p.add_argument("--seeds", type=int, required=True, help="how many seeds (0 .. N-1)")
        else:
            p.add_argument("--transition", choices=("alpha1", "alpha2"), required=True)
        if name == "trace":
            p.add_argument("--size", type=int, required=True, help="one of the sweep's sizes")
            p.add_argument("--step", type=int, required=True, help="the alpha step of the window (0 = its first)")
            p.add_argument("--seed", type=int, required=True)
            p.add_argument("--out", default=None, help="write the JSON here instead of printing it")
        if name == "cap":
            p.add_argument("--store", required=True, help="the store holding the sweep's point")
            p.add_argument("--size", type=int, required=True, help="one of the sweep's sizes")
            p.add_argument("--steps", required=True, help="comma-separated alpha steps of the window (0 = its first)")
            p.add_argument("--max-iter", type=int, required=True, help="the larger cap")
            p.add_argument("--seeds", type=int, default=None, help="seeds 0 .. N-1 (default: all the point's)")
            p.add_argument("--workers", type=int, default=1)
            p.add_argument("--tol-strip", type=float, default=None,
                           help="rerun with this posterior error tolerance in strip coordinates (c < ~0.4) instead "
                                "of the channel's default, and compare with the default's cap logs")
        if name == "table":
            source = p.add_mutually_exclusive_group()
            source.add_argument("--log", default=None, help="another log than this version's (e.g. an earlier version's)")
            source.add_argument("--store", default=None, help="read the sweep's point in this store (done, or its "
                                                              "finished works so far)")
            p.add_argument("--markdown", action="store_true", help="the table of docs/validation/smi.md")
        p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUES")
        if name == "run":
            p.add_argument("--sizes", required=True, help="comma-separated, a subset of the sweep's sizes")
            p.add_argument("--workers", type=int, default=2)
            p.add_argument("--seeds", default=None,
                           help="comma-separated, one per size: only its first N seeds of each alpha")
    args = parser.parse_args(argv)
    OUT = args.logs
    if args.command == "run":
        sizes = [int(v) for v in args.sizes.split(",")]
        seeds = None if args.seeds is None else [int(v) for v in args.seeds.split(",")]
        if seeds is not None and len(seeds) != len(sizes):
            parser.error(f"--seeds gives {len(seeds)} counts for {len(sizes)} sizes")
        run(args.skip, args.transition, sizes, args.workers, args.overrides, seeds)
    elif args.command == "parts":
        return parts(args.skip, args.store, args.overrides)
    elif args.command == "log":
        return log(args.skip, args.store, args.overrides)
    elif args.command == "design":
        return design(args.skip, args.store, args.sizes, args.seeds, args.overrides)
    elif args.command == "trace":
        return trace(args.skip, args.transition, args.size, args.step, args.seed, args.overrides, args.out)
    elif args.command == "cap":
        steps = [int(v) for v in args.steps.split(",") if v.strip()]
        return cap(args.skip, args.transition, args.size, steps, args.max_iter, args.store, args.seeds,
                   args.workers, args.overrides, args.tol_strip)
    else:
        return table(args.skip, args.transition, args.overrides, args.log, args.store, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
