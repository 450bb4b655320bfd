"""The onset's stopping rule (core/onset.py, `settled_low`) replayed on the logged per-iteration runs: does
stopping the instances whose overlap has settled below a fraction of the level move the onset?

    python benchmarks/onset_stopping.py [--fraction F] [--window W] [--cap 150]

(defaults: the smi onset method's stop_fraction and stop_window)

The logs are the `smi_onset.py cap` reruns of stored instances past the sweep's cap (|M_ll| per iteration, 6
decimals): c = 1 and c = 0.1 at d = 2000, alpha = 0.7 and 0.8, to 450 iterations; c = 1e-4 at d = 250,
alpha = 1.0, to 300. Per log: how many instances the rule stops and when, whether any stopped instance is
above the level later (at the sweep's cap or at any logged iteration after its stop: the rule's verdict
wrong), the largest change of a stopped instance's final overlap against the capped run's, the iterations
saved, and the onset at that size from these alphas with the capped values and with the stopped ones (the
same bootstrap draws).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from seqphase.core import onset

OUT = Path(__file__).resolve().parent / "results" / "onset"
LOGS = ("smi-c1-alpha1-d2000-cap450-v3.jsonl", "smi-c0.1-alpha1-d2000-cap450-v3.jsonl",
        "smi-c0.0001-alpha1-d250-cap300-v3.jsonl")
ALPHAS = {"a2": 0.7, "a3": 0.8, "a5": 1.0}  # the alpha1 window's steps 0.5 + 0.1 j


def stop_iteration(path, bound, cap, window):
    """The first iteration t <= cap at which the rule stops this trajectory, or None."""
    for t in range(window, min(cap, len(path) - 1) + 1):
        if t < cap and onset.settled_low(path[t - window:t + 1], bound=bound, remaining=cap - t):
            return t
    return None


def replay(name, fraction, window, cap, level=2.0):
    rows = [json.loads(line) for line in (OUT / name).read_text().splitlines() if line.strip()]
    d = int(rows[0]["key"].split("-")[1][1:])
    lev = level / math.sqrt(d)
    bound = fraction * lev
    steps = sorted({r["key"].split("-")[2] for r in rows})
    seeds = sorted({int(r["key"].split("-")[3][1:]) for r in rows})
    capped = np.full((len(steps), len(seeds)), np.nan)
    stopped = capped.copy()
    n_stop = wrong = 0
    change, saved, total = 0.0, 0, 0
    when = []
    for r in rows:
        _, _, step, seed = r["key"].split("-")
        i, j = steps.index(step), seeds.index(int(seed[1:]))
        path = r["trajectory"]
        end = min(cap, len(path) - 1)  # the capped run's last iteration (earlier if it met the tolerance)
        capped[i, j] = path[end]
        t = stop_iteration(path, bound, cap, window)
        stopped[i, j] = path[end] if t is None else path[t]
        total += end
        if t is not None:
            n_stop += 1
            when.append(t)
            saved += end - t
            change = max(change, abs(path[t] - path[end]))
            wrong += max(path[t:]) > lev
    alphas = np.array([ALPHAS[s] for s in steps])
    print(f"{name}: d = {d}, level {lev:.4f}, bound {bound:.2e} (fraction {fraction:g}), window {window}, cap {cap}")
    print(f"  stopped {n_stop} of {len(rows)} instances (at iterations {min(when, default=0)}-{max(when, default=0)}); "
          f"above the level after their stop (any logged iteration): {wrong}; largest change of a final overlap "
          f"{change:.2e}; iterations saved {saved} of {total} ({saved / total:.0%})")
    for i, a in enumerate(alphas):
        print(f"  alpha {a:.1f}: mean capped {capped[i].mean():.5f}, stopped {stopped[i].mean():.5f} "
              f"({(capped[i] > lev).sum()} / {(stopped[i] > lev).sum()} of {len(seeds)} above the level)")
    if len(alphas) > 1:
        for label, obs in (("capped", capped), ("stopped", stopped)):
            try:
                value, se = onset.onset_at_size(alphas, obs, d, level=level, rng=np.random.default_rng(0))
                print(f"  onset at d = {d}, {label}: {value:.5f} +- {se:.4f}")
            except onset.OnsetWindowError as exc:
                print(f"  onset at d = {d}, {label}: {exc}")
    return wrong


def main(argv=None):
    from seqphase.core.models import get_model

    defaults = get_model("smi").method("onset").settings
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fraction", type=float, default=defaults["stop_fraction"].default)
    ap.add_argument("--window", type=int, default=defaults["stop_window"].default)
    ap.add_argument("--cap", type=int, default=150)
    a = ap.parse_args(argv)
    wrong = sum(replay(name, a.fraction, a.window, a.cap) for name in LOGS)
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
