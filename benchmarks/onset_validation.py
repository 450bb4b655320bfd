"""The onset rule (core/onset.py) on a transition known exactly: real phase retrieval (glm, gaussian prior,
y = |z|), weak recovery at alpha = 1/2.

    python benchmarks/onset_validation.py run [--workers 2]   # the GAMP instances (~15 CPU-minutes)
    python benchmarks/onset_validation.py table               # per-size onsets and extrapolations

`run` executes the glm `onset` method's own works (`OnsetMethod.tasks`, the same `run_instance` and
streams a sweep uses) in a process pool, for SeedSequence(12345): d = 250, 500, 1000 on the window
alpha = 0.3..1.0 (15 alphas) and d = 2000, 4000 on 0.5..1.0 (11 alphas), 16 seeds, at most 300 GAMP
iterations, one BLAS thread a process; the final overlaps go to benchmarks/results/onset/*.json. `table`
applies the rule on the common window 0.5..1.0 at levels 1.5, 2, 3 and extrapolates with each
correction, on all five sizes and on the three largest (docs/onset.md).
"""

from __future__ import annotations

import argparse
import os
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy: a BLAS thread pool per process only fights the other processes

import numpy as np

OUT = Path(__file__).resolve().parent / "results" / "onset"
PARAMS = {"prior": "gaussian", "channel": "abs", "rho": 1.0, "delta": 0.0}
RUNS = {  # file stem -> settings of the method
    "small": {"sizes": [250, 500, 1000], "n_seeds": 16, "alpha_lo": 0.3, "alpha_hi": 1.0, "alpha_n": 15,
              "max_iter": 300},
    "large": {"sizes": [2000, 4000], "n_seeds": 16, "alpha_lo": 0.5, "alpha_hi": 1.0, "alpha_n": 11,
              "max_iter": 300},
}
WINDOW = np.linspace(0.5, 1.0, 11)


def _work(work):
    start = time.process_time()
    return work.key, work.fn(**work.kwargs)["overlap"], time.process_time() - start


def run(workers):
    from seqphase.core.models import get_model

    model = get_model("glm")
    OUT.mkdir(parents=True, exist_ok=True)
    for stem, raw in RUNS.items():
        settings = model.check_settings("onset", raw)
        works = next(model.method("onset").tasks(PARAMS, settings, np.random.SeedSequence(12345)))
        start, overlaps, cpu = time.time(), {}, {}
        with ProcessPoolExecutor(workers) as pool:
            for key, overlap, seconds in pool.map(_work, works, chunksize=4):
                overlaps[key], cpu[key] = overlap, seconds
        with open(OUT / f"{stem}.json", "w") as fh:
            json.dump({"settings": settings, "overlap": overlaps, "cpu": cpu}, fh)
        print(f"{stem}: {len(works)} instances, {time.time() - start:.0f} s wall, {sum(cpu.values()):.0f} CPU-s",
              flush=True)


def overlaps_on_window():
    """{d: (alpha, seed) final overlaps on WINDOW}."""
    out = {}
    for stem in RUNS:
        with open(OUT / f"{stem}.json") as fh:
            data = json.load(fh)
        s = data["settings"]
        alphas = np.linspace(s["alpha_lo"], s["alpha_hi"], s["alpha_n"])
        steps = [int(np.argmin(np.abs(alphas - a))) for a in WINDOW]
        assert np.allclose(alphas[steps], WINDOW)
        for d in s["sizes"]:
            out[d] = np.array([[data["overlap"][f"alpha-d{d}-a{j}-s{k}"] for k in range(s["n_seeds"])]
                               for j in steps])
    return dict(sorted(out.items()))


def table():
    from seqphase.core import onset

    data = overlaps_on_window()
    sizes = list(data)
    print("mean |m|: alpha " + " ".join(f"{a:.2f}" for a in WINDOW))
    for d, o in data.items():
        print(f"  d = {d:5d}: " + " ".join(f"{v:.3f}" for v in o.mean(axis=1)))
    rng = np.random.default_rng(0)
    for level in (1.5, 2.0, 3.0):
        pairs = [onset.onset_at_size(WINDOW, data[d], d, level=level, rng=rng) for d in sizes]
        print(f"level {level}: onsets " + ", ".join(f"{v:.3f} +- {e:.3f}" for v, e in pairs))
        for correction in onset.CORRECTIONS:
            for subset in (sizes, sizes[2:]):
                idx = [sizes.index(d) for d in subset]
                inf, se, chi2 = onset.extrapolate(subset, [pairs[i][0] for i in idx], [pairs[i][1] for i in idx],
                                                  correction)
                print(f"  {correction:7s} d = {subset[0]}-{subset[-1]}: {inf:.3f} +- {se:.3f} "
                      f"(chi2 {chi2:.1f}, {(inf - 0.5) / se:+.1f} s.e. from 1/2)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run").add_argument("--workers", type=int, default=2)
    sub.add_parser("table")
    args = parser.parse_args(argv)
    run(args.workers) if args.command == "run" else table()
    return 0


if __name__ == "__main__":
    sys.exit(main())
