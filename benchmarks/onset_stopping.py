"""The onset's stopping rule (core/onset.py, `stop_test`: `settled_low` and `settled_flat`) replayed on the
logged per-iteration runs: does stopping the instances whose overlaps have settled at zero or stand still
move the onset?

    python benchmarks/onset_stopping.py [--fraction F] [--window W] [--envelope K] [--flat R] [--cap 150]
    python benchmarks/onset_stopping.py --traces [LOG ...] [--fraction F] [--window W] [--envelope K] [--flat R]

(defaults: the smi onset method's stop_fraction, stop_window, stop_envelope and stop_flat; --flat 0 replays
the zero rule alone, --envelope 1 on the raw values)

Two kinds of log (benchmarks/results/onset/):
- the `smi_onset.py cap` reruns of stored instances past the sweep's cap (the watched |M11| per iteration, 6
  decimals): c = 1 and c = 0.1 at d = 2000, alpha = 0.7 and 0.8, to 450 iterations; c = 1e-4 at d = 250,
  alpha = 1.0, to 300. Only the watched layer is logged, so the replay judges that layer alone (the sweep's
  rule also waits for |M22|: it stops these runs no earlier than the replay);
- the `smi_onset_grid.py` runs (|M11| and |M22| per iteration, 7 decimals, at most 150 iterations):
  c = 0.1 at d = 500, alpha = 0.7 and 0.8, 16 seeds, on the onset's posterior grid (`posterior`).

Per log: how many instances the rule stops and when (by which rule), whether any instance stopped at zero ends
above the bound at the cap (the zero test's promise broken) or is above the level later (at the cap or at any logged iteration after its stop: the zero rule's verdict wrong),
whether any stopped instance ends on the other side of the level at the cap, the largest change of a
stopped instance's final overlap against the capped run's (absolute, and relative for those stopped as
flat), the iterations saved, and the onset at that size from these alphas with the capped values and with
the stopped ones (the same bootstrap draws).
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
        "smi-c0.0001-alpha1-d250-cap300-v3.jsonl", "smi-c0.1-d500-grid-pairs.jsonl")
#: `smi_onset.py trace` runs (every layer, 4 significant digits, cap 150): c = 0.1 at alpha_2 = 0.2-0.3
#: (d = 1000: steps 2-4, d = 2000: steps 3-4, seeds 0-5) and alpha_1 = 0.7-0.8 (d = 1000: steps 2-3, seeds
#: 0-5; d = 2000: step 3, seed 0), c = 1 at alpha = 0.8, d = 250 (seeds 12-15)
TRACES = "smi-traces-both-layers.jsonl"
ALPHAS = {"a2": 0.7, "a3": 0.8, "a5": 1.0}  # the alpha1 window's steps 0.5 + 0.1 j


def instances(name, grid):
    """(d, [(alpha, seed, layers)]) of a log, `layers` the per-iteration |M_ll| (one row per logged layer, the
    watched |M11| first)."""
    rows = [json.loads(line) for line in (OUT / name).read_text().splitlines() if line.strip()]
    if "key" in rows[0]:  # a cap log: the watched layer only
        d = int(rows[0]["key"].split("-")[1][1:])
        return d, [(ALPHAS[r["key"].split("-")[2]], int(r["key"].split("-")[3][1:]), np.array([r["trajectory"]]))
                   for r in rows]
    rows = [r for r in rows if r["posterior"] == grid]
    return rows[0]["d"], [(r["alpha"], r["seed"], np.array([r["m11"], r["m22"]])) for r in rows]


def stop_iteration(records, test, cap):
    """The first iteration t < cap at which `test` (core/onset.py, `stop_test`, on every logged layer) stops
    the run whose per-iteration records ({"overlap": M}) are `records`, or None."""
    for t in range(1, min(cap, len(records) - 1)):
        if test(records[:t + 1]):
            return t
    return None


def replay(name, fraction, window, flat, cap, grid, envelope, level=2.0):
    d, runs = instances(name, grid)
    lev = level / math.sqrt(d)
    bound = fraction * lev
    test = onset.stop_test(d, level=level, fraction=fraction, cap=cap, window=window, flat=flat, envelope=envelope)
    alphas = sorted({a for a, _, _ in runs})
    seeds = sorted({s for _, s, _ in runs})
    capped = np.full((len(alphas), len(seeds)), np.nan)
    stopped = capped.copy()
    n_low = n_flat = wrong = flipped = over = 0
    change, rel, saved, total = 0.0, 0.0, 0, 0
    when = []
    for alpha, seed, layers in runs:
        i, j = alphas.index(alpha), seeds.index(seed)
        path = layers[0]
        end = min(cap, len(path) - 1)  # the capped run's last iteration (earlier if it met the tolerance)
        capped[i, j] = path[end]
        records = [{"overlap": np.diag(m)} for m in layers.T]
        t = stop_iteration(records, test, cap)
        stopped[i, j] = path[end] if t is None else path[t]
        total += end
        if t is None:
            continue
        when.append(t)
        saved += end - t
        change = max(change, abs(path[t] - path[end]))
        flipped += (path[t] > lev) != (path[end] > lev)
        if path[t] < bound:  # the watched layer at zero (a layer standing still is at or above the bound)
            n_low += 1
            wrong += max(path[t:]) > lev
            over += path[end] >= bound  # the zero test's promise: below the bound at the cap
        else:
            n_flat += 1
            rel = max(rel, abs(path[t] - path[end]) / path[end])
    print(f"{name}: d = {d}, level {lev:.4f}, bound {bound:.2e} (fraction {fraction:g}), window {window}, "
          f"envelope {envelope}, flat {flat:g}, cap {cap}, {len(layers)} layer(s) logged")
    print(f"  stopped {n_low + n_flat} of {len(runs)} instances ({n_low} at zero, {n_flat} standing still; at "
          f"iterations {min(when, default=0)}-{max(when, default=0)}); at zero but above the bound at the cap: {over}, "
          f"above the level later: {wrong}; "
          f"on the other side of the level at the cap: {flipped}; largest change of a final overlap {change:.2e} "
          f"(standing still: {rel:.1e} of its value); iterations saved {saved} of {total} ({saved / total:.0%})")
    for i, a in enumerate(alphas):
        print(f"  alpha {a:.1f}: mean capped {capped[i].mean():.5f}, stopped {stopped[i].mean():.5f} "
              f"({(capped[i] > lev).sum()} / {(stopped[i] > lev).sum()} of {len(seeds)} above the level)")
    if len(alphas) > 1:
        for label, obs in (("capped", capped), ("stopped", stopped)):
            try:
                value, se = onset.onset_at_size(np.array(alphas), obs, d, level=level, rng=np.random.default_rng(0))
                print(f"  onset at d = {d}, {label}: {value:.5f} +- {se:.4f}")
            except onset.OnsetWindowError as exc:
                print(f"  onset at d = {d}, {label}: {exc}")
    return wrong + flipped


def replay_traces(paths, fraction, window, flat, envelope, level=2.0):
    """The rule on trace logs (`smi_onset.py trace`: every layer per iteration, no early stop, any skip, size
    and alpha, one instance a line, or tests/data/smi's files of them): instances stopped, iterations saved, and stopped instances that break the
    rule's promise on any layer (on the other side of the level at the cap, or stopped at zero and above the
    bound at the cap). Returns the number broken."""
    runs = []
    for path in paths:
        text = Path(path).read_text()
        if text.lstrip().startswith('{"about"'):  # a test data file: {"about": ..., "runs": [...]}
            runs += json.loads(text)["runs"]
        else:
            runs += [json.loads(line) for line in text.splitlines() if line.strip()]
    n_stopped = broken = ran = total = 0
    for run in runs:
        d, cap = run["d"], run["cap"]
        lev = level / math.sqrt(d)
        bound = fraction * lev
        layers = np.array([run[k] for k in sorted(k for k in run if k.startswith("m") and k[1:].isdigit())])
        end = min(cap, layers.shape[1] - 1)
        test = onset.stop_test(d, level=level, fraction=fraction, cap=cap, window=window, flat=flat,
                               envelope=envelope)
        t = stop_iteration([{"overlap": np.diag(m)} for m in layers.T], test, end)
        total += end
        ran += end if t is None else t
        if t is not None:
            n_stopped += 1
            broken += int(any((m[t] > lev) != (m[end] > lev) or (m[t] < bound <= m[end]) for m in layers))
    names = ", ".join(Path(p).name for p in paths)
    print(f"{names}: {len(runs)} instances, every layer; fraction {fraction:g}, window {window}, envelope "
          f"{envelope}, flat {flat:g}: stopped {n_stopped}, iterations saved {total - ran} of {total} "
          f"({(total - ran) / total:.0%}); broken {broken}")
    return broken


def main(argv=None):
    from seqphase.core.models import get_model

    defaults = get_model("smi").method("onset").settings
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fraction", type=float, default=defaults["stop_fraction"].default)
    ap.add_argument("--window", type=int, default=defaults["stop_window"].default)
    ap.add_argument("--flat", type=float, default=defaults["stop_flat"].default)
    ap.add_argument("--envelope", type=int, default=defaults["stop_envelope"].default)
    ap.add_argument("--cap", type=int, default=150)
    ap.add_argument("--traces", nargs="*", default=None, metavar="LOG",
                    help="replay trace logs instead (default with no LOG: " + TRACES + ")")
    a = ap.parse_args(argv)
    if a.traces is not None:
        return 1 if replay_traces(a.traces or [OUT / TRACES], a.fraction, a.window, a.flat, a.envelope) else 0
    grid = defaults["posterior"].default
    wrong = sum(replay(name, a.fraction, a.window, a.flat, a.cap, grid, a.envelope) for name in LOGS)
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
