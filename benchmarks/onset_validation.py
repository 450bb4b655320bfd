"""The onset rule (core/onset.py) on transitions whose location is known, run by the families' own `onset` methods:

- `phase-retrieval`: real phase retrieval (glm, gaussian prior, y = |z|), weak recovery at alpha = 1/2;
- `z1z2`: the multi-index model y = z1 z2 (p = 2, gaussian prior), weak learnability at alpha = 0.593751
  (the SE's linear stability; the SE bisection gives 0.593632: docs/validation/multiindex.md). This case was run
  after the rule and its default (level 2, d^-1/3) were fixed on phase retrieval, and nothing of the rule
  was changed after it: it tests the rule, it did not shape it.

    python benchmarks/onset_validation.py run [--case CASE] [--workers 2] [--only STEM] [--out DIR]
    python benchmarks/onset_validation.py table [--case CASE] [--runs DIR]
    python benchmarks/onset_validation.py design [--case CASE] [--workers 2] [--out DIR]

`run` executes the method's own works (`OnsetMethod.tasks`, the same `run_instance` and streams a sweep
uses) in a process pool, for SeedSequence(12345), 16 seeds, one BLAS thread a process; the final overlaps
and each instance's CPU-s go to --out/<stem>.json (default benchmarks/out/onset/; the runs of
docs/validation/onset.md are in benchmarks/data/onset/). phase-retrieval: d = 250, 500, 1000 on alpha = 0.3..1.0 (15
alphas), d = 2000, 4000 on 0.5..1.0 (11 alphas), at most 300 iterations (~15 CPU-minutes). z1z2: d = 250,
500, 1000, 2000 on 0.5..1.2 (15 alphas), d = 4000 on 0.6..1.0 (9 alphas), at most 300 iterations (the
window chosen to bracket the finite-d onsets seen on 3 seeds at d = 500 and 1000: ~0.8 there).
`table` reads the runs in --runs (default benchmarks/data/onset/) and applies the rule on the case's common window (phase retrieval: 0.5..1.0; z1z2: each size's own) at
levels 1.5, 2, 3 and extrapolates with each
correction, on all sizes and on the three largest (docs/validation/onset.md).
`design` runs the case's sweep (glm-phase-retrieval-onset, multiindex-z1z2-onset) with `--set
design=sequential` (core/onset.py): its one point, on the point's own streams as `seqphase run` draws them,
the design's rounds of works in a process pool; it prints the design's windows, onsets and extrapolation
with its distance from the known value, and the instances' CPU-s; the results go to
--out/<case>-sequential.json.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy: a BLAS thread pool per process only fights the other processes

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import harness  # noqa: E402

OUT = harness.out_path("onset")
LOGGED = harness.DATA / "onset"  # the runs of docs/validation/onset.md
#: case -> model, parameters, the exact transition, {file stem: method settings}, the rule's common window
CASES = {
    "phase-retrieval": {
        "model": "glm", "sweep": "glm-phase-retrieval-onset", "params": {"prior": "gaussian", "channel": "abs", "rho": 1.0, "delta": 0.0},
        "exact": 0.5, "window": np.linspace(0.5, 1.0, 11),
        "runs": {
            "small": {"sizes": [250, 500, 1000], "n_seeds": 16, "alpha_lo": 0.3, "alpha_hi": 1.0, "alpha_n": 15,
                      "max_iter": 300},
            "large": {"sizes": [2000, 4000], "n_seeds": 16, "alpha_lo": 0.5, "alpha_hi": 1.0, "alpha_n": 11,
                      "max_iter": 300},
        }},
    "z1z2": {
        "model": "multiindex", "sweep": "multiindex-z1z2-onset", "params": {"channel": "z1z2"},
        "exact": 0.593751, "window": None,
        "runs": {
            "z1z2-small": {"sizes": [250, 500, 1000, 2000], "n_seeds": 16, "alpha_lo": 0.5, "alpha_hi": 1.2,
                           "alpha_n": 15, "max_iter": 300},
            "z1z2-large": {"sizes": [4000], "n_seeds": 16, "alpha_lo": 0.6, "alpha_hi": 1.0, "alpha_n": 9,
                           "max_iter": 300},
        }},
}


def _work(work):
    start = time.process_time()
    return work.key, work.fn(**work.kwargs)["overlap"], time.process_time() - start


def run(case, workers, only=None, folder=OUT):
    from seqphase.core.models import get_model

    harness.print_machine()
    spec = CASES[case]
    model = get_model(spec["model"])
    for stem, raw in spec["runs"].items():
        if only and stem not in only:
            continue
        harness.writable(Path(folder) / f"{stem}.json")  # refused before the run, not after it
        settings = model.check_settings("onset", raw)
        works = next(model.method("onset").tasks(spec["params"], settings, np.random.SeedSequence(12345)))
        start, overlaps, cpu = time.time(), {}, {}
        with ProcessPoolExecutor(workers) as pool:
            for key, overlap, seconds in pool.map(_work, works, chunksize=4):
                overlaps[key], cpu[key] = overlap, seconds
        harness.write_json(Path(folder) / f"{stem}.json", {"settings": settings, "overlap": overlaps, "cpu": cpu})
        print(f"{stem}: {len(works)} instances, {time.time() - start:.0f} s wall, {sum(cpu.values()):.0f} CPU-s",
              flush=True)


def _result(work):
    start = time.process_time()
    return work.key, work.fn(**work.kwargs), time.process_time() - start


def design(case, workers, folder=OUT):
    """The case's sweep point under the sequential design, its rounds of works in a process pool (the same
    works and streams as `seqphase run SWEEP --set design=sequential`, whose driver runs them on a cluster)."""
    from seqphase.core.models import check_outputs, get_model, point_stream
    from seqphase.sweeps.planner import payload, plan_sweep
    from seqphase.sweeps.spec import load_sweep

    harness.writable(Path(folder) / f"{case}-sequential.json")  # refused before the run, not after it
    harness.print_machine()
    spec = CASES[case]
    plan = plan_sweep(load_sweep(spec["sweep"], overrides=["design=sequential"]))
    (point,) = plan.points
    job = payload(plan, point)
    model = get_model(job["model"])
    settings = job["settings"]
    tasks = model.method("onset").tasks(job["params"], settings, point_stream(job["seed_entropy"], job["seed_key"]))
    start, results, cpu, rounds = time.time(), {}, {}, 0
    with ProcessPoolExecutor(workers) as pool:
        works = next(tasks)
        while True:
            rounds += 1
            got = list(pool.map(_result, works))
            results.update({k: r for k, r, _ in got})
            cpu.update({k: c for k, _, c in got})
            try:
                works = tasks.send({k: r for k, r, _ in got})
            except StopIteration as stop:
                out = check_outputs(model, "onset", settings, stop.value)
                break
    harness.write_json(Path(folder) / f"{case}-sequential.json", {
        "sweep": spec["sweep"], "settings": settings, "hash": point.hash,
        "estimate": float(out["alpha_gamp"]), "se": float(out["alpha_gamp_se"]),
        "onsets": out["alpha_gamp_d"].tolist(), "onset_se": out["alpha_gamp_d_se"].tolist(),
        "step_lo": out["alpha_step_lo"].tolist(), "step_hi": out["alpha_step_hi"].tolist(),
        "results": results, "cpu": cpu})
    alphas, exact = out["alpha_alpha"], spec["exact"]
    for si, d in enumerate(settings["sizes"]):
        lo, hi = out["alpha_step_lo"][si], out["alpha_step_hi"][si]
        print(f"d = {d:5d}: alphas {alphas[lo]:.2f} .. {alphas[hi]:.2f} ({hi - lo + 1} of {len(alphas)}), "
              f"{out['alpha_n_seeds'][si]} seeds; "
              f"onset {out['alpha_gamp_d'][si]:.4f} +- {out['alpha_gamp_d_se'][si]:.4f}")
    inf, se = float(out["alpha_gamp"]), float(out["alpha_gamp_se"])
    total = sum(cpu.values())
    print(f"{spec['sweep']} --set design=sequential: {inf:.4f} +- {se:.4f} (chi2 {float(out['alpha_gamp_chi2']):.2f}), "
          f"{(inf - exact) / se:+.2f} s.e. from {exact}; {len(results)} instances in {rounds} rounds, "
          f"{total:.0f} CPU-s, {time.time() - start:.0f} s wall", flush=True)


def overlaps_on_window(case, runs=LOGGED):
    """{d: (the window's alphas, (alpha, seed) final overlaps)}, on the case's common window, or on each run's
    own where the case has none."""
    from seqphase.core.onset import instance_key

    window, out = CASES[case]["window"], {}
    for stem in CASES[case]["runs"]:
        path = Path(runs) / f"{stem}.json"
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        s = data["settings"]
        alphas = np.linspace(s["alpha_lo"], s["alpha_hi"], s["alpha_n"])
        steps = range(len(alphas)) if window is None else [int(np.argmin(np.abs(alphas - a))) for a in window]
        assert window is None or np.allclose(alphas[steps], window)
        for d in s["sizes"]:
            out[d] = alphas[list(steps)], np.array([[data["overlap"][instance_key("alpha", d, j, k)]
                                                     for k in range(s["n_seeds"])] for j in steps])
    return dict(sorted(out.items()))


def table(case, runs=LOGGED):
    from seqphase.core import onset

    data, exact = overlaps_on_window(case, runs), CASES[case]["exact"]
    sizes = list(data)
    for d, (alphas, o) in data.items():
        means = " ".join(f"{a:.2f}: {v:.3f}" for a, v in zip(alphas, o.mean(axis=1)))
        print(f"d = {d:5d}: mean overlap at alpha {means}")
    rng = np.random.default_rng(0)
    for level in (1.5, 2.0, 3.0):
        pairs = [onset.onset_at_size(*data[d], d, level=level, rng=rng) for d in sizes]
        print(f"level {level}: onsets " + ", ".join(f"{v:.3f} +- {e:.3f}" for v, e in pairs))
        for correction in onset.CORRECTIONS:
            for subset in (sizes, sizes[2:]):
                idx = [sizes.index(d) for d in subset]
                inf, se, chi2 = onset.extrapolate(subset, [pairs[i][0] for i in idx], [pairs[i][1] for i in idx],
                                                  correction)
                print(f"  {correction:7s} d = {subset[0]}-{subset[-1]}: {inf:.3f} +- {se:.3f} "
                      f"(chi2 {chi2:.1f}, {(inf - exact) / se:+.1f} s.e. from {exact})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run")
    run_parser.add_argument("--workers", type=int, default=2)
    run_parser.add_argument("--only", nargs="*", help="file stems of the case to run (default: all)")
    table_parser = sub.add_parser("table")
    design_parser = sub.add_parser("design")
    design_parser.add_argument("--workers", type=int, default=2)
    for p in (run_parser, design_parser):
        p.add_argument("--out", type=Path, default=OUT, help="folder of the results (default: benchmarks/out/onset)")
    table_parser.add_argument("--runs", type=Path, default=LOGGED,
                              help="folder of the runs (default: benchmarks/data/onset, the docs' runs)")
    for p in (run_parser, table_parser, design_parser):
        p.add_argument("--case", choices=tuple(CASES), default="phase-retrieval")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.case, args.workers, args.only, args.out)
    elif args.command == "design":
        design(args.case, args.workers, args.out)
    else:
        table(args.case, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
