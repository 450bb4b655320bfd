"""The sequential design of the onset method (core/onset.py) replayed on logged instances: the design's own
decisions (which alphas at which size, how many seeds) answered from the final overlaps of instances that ran
on the full grid, so its estimate and its share of the grid's cost are read off without running GAMP again.

    python benchmarks/onset_design.py [--case CASE ...] [--seeds N] [--max-seeds M] [--target SE]
                                      [--margin M] [--high-end RULE]

Cases (the logs in benchmarks/results/onset/): `phase-retrieval` (glm, weak recovery at 1/2: small.json and
large.json, window 0.5 ... 1.0, d = 250 ... 4000), `z1z2` (multiindex, 0.593751: z1z2-small.json, window
0.5 ... 1.2, d = 250 ... 2000), `smi-c0.1-alpha1` (smi-c0.1-alpha1-v2.jsonl, d = 250 ... 1000, the sizes
with 16 seeds), `smi-c1e-4-alpha1` (smi-c0.0001-alpha1-v3.jsonl, d = 250 ... 1000) and `smi-c1e-4-alpha2`
(smi-c0.0001-alpha2-v3.jsonl, d = 250 ... 2000). The logged
instances are the grid's (16 seeds a cell), so `--max-seeds` is at most 16 here. Printed per case: the
design's window and seeds per size, its per-size onsets and extrapolation (level 2, d^-1/3) beside the grid's
on the same instances, the rounds it took, and its share of the grid's CPU-s (the logged CPU-s of the
instances it asked for over all of the grid's). `--high-end` compares the rule that settles a window's high
end (`core/onset.py`, `end_doubts`): `next-resample` (the design's: a resample of the next alpha, the end's
seed noise three times), `next-mean` (the next alpha's mean only, twice) or `own-mean` (the end's own
resampled mean, as at the grid's last alpha).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import numpy as np

from seqphase.core import onset
from seqphase.core.models import drive, get_model

OUT = Path(__file__).resolve().parent / "results" / "onset"
CASES = {
    "phase-retrieval": {"model": "glm", "params": {"prior": "gaussian", "channel": "abs", "rho": 1.0, "delta": 0.0},
                        "transition": "alpha", "exact": 0.5, "files": ("small.json", "large.json"),
                        "window": (0.5, 1.0, 11), "sizes": [250, 500, 1000, 2000, 4000]},
    "z1z2": {"model": "multiindex", "params": {"channel": "z1z2"}, "transition": "alpha", "exact": 0.593751,
             "files": ("z1z2-small.json",), "window": (0.5, 1.2, 15), "sizes": [250, 500, 1000, 2000]},
    "smi-c0.1-alpha1": {"model": "smi", "params": {"skip": 0.1}, "transition": "alpha1", "exact": None,
                        "files": ("smi-c0.1-alpha1-v2.jsonl",), "window": (0.5, 1.1, 7), "sizes": [250, 500, 1000]},
    "smi-c1e-4-alpha1": {"model": "smi", "params": {"skip": 1e-4}, "transition": "alpha1", "exact": None,
                         "files": ("smi-c0.0001-alpha1-v3.jsonl",), "window": (0.5, 1.1, 7), "sizes": [250, 500, 1000]},
    "smi-c1e-4-alpha2": {"model": "smi", "params": {"skip": 1e-4}, "transition": "alpha2", "exact": None,
                         "files": ("smi-c0.0001-alpha2-v3.jsonl",), "window": (0.1, 0.5, 9),
                         "sizes": [250, 500, 1000, 2000]},
}


class NotLogged(KeyError):
    """The design asked for an instance the logs do not hold."""


def load(case):
    """{(d, alpha to 9 decimals, seed): (result dict, CPU-s)} of a case's logged instances."""
    spec, out = CASES[case], {}
    for name in spec["files"]:
        text = (OUT / name).read_text()
        if name.endswith(".json"):
            data = json.loads(text)
            s = data["settings"]
            alphas = np.linspace(s["alpha_lo"], s["alpha_hi"], s["alpha_n"])
            rows = [{"key": k, "overlap": v, "cpu_s": data["cpu"][k]} for k, v in data["overlap"].items()]
        else:
            lo, hi, n = spec["window"]
            alphas = np.linspace(lo, hi, n)
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        for r in rows:
            _, d, j, seed = onset.parse_instance_key(r["key"])
            result = {k: v for k, v in r.items() if k not in ("key", "cpu_s")}
            result.setdefault("n_iter", 0)
            result.setdefault("converged", 0)
            out[(d, round(float(alphas[j]), 9), seed)] = (result, r.get("cpu_s", 0.0))
    return out


DESIGNS_END_DOUBTS = onset.end_doubts  # the design's rule, kept before --high-end replaces the module's


def next_mean_doubts(overlaps, d, *, level, margin, beyond=True, n_boot=onset.N_BOOT):
    """`end_doubts` with the high end's law the next alpha's mean alone (the end's resampled mean plus one
    resample deviation, twice its variance): the crossing on the observed means, not its bootstrap's."""
    overlaps = np.asarray(overlaps, dtype=float)
    floor = level / np.sqrt(d)
    rng = np.random.default_rng(0)  # the draws in the order the design's rule makes them

    def resampled(row):
        return row[rng.integers(0, row.size, size=(n_boot, row.size))].mean(axis=1)

    low, high = (row[~onset.diverged(row)] for row in (overlaps[0], overlaps[-1]))
    low_doubt = low.size == 0 or float(np.mean(resampled(low) >= floor)) > margin
    if high.size == 0:
        return low_doubt, True
    following = resampled(high) + (resampled(high) - high.mean()) if beyond else resampled(high)
    return low_doubt, float(np.mean(following < floor)) > margin


HIGH_END = {
    "next-resample": DESIGNS_END_DOUBTS,
    "next-mean": next_mean_doubts,
    "own-mean": lambda overlaps, d, **kw: DESIGNS_END_DOUBTS(overlaps, d, **{**kw, "beyond": False}),
}


def replay(case, n_seeds, max_seeds, target, margin=0.05):
    spec = CASES[case]
    model = get_model(spec["model"])
    method = copy.copy(model.method("onset"))
    t = spec["transition"]
    method.transitions = {t: method.transitions[t]}
    lo, hi, n = spec["window"]
    raw = {"sizes": spec["sizes"], "n_seeds": n_seeds, f"{t}_lo": lo, f"{t}_hi": hi, f"{t}_n": n}
    settings = {**{k: p.default for k, p in onset.design_settings({t: target}).items()}, **method_defaults(method),
                **raw, "design": "sequential", "max_seeds": max_seeds, f"{t}_se": target, "stop_window": 0,
                "margin": margin}
    logged = load(case)
    asked = []

    def execute(work):
        k = (work.kwargs["d"], round(work.kwargs["alpha"], 9), onset.parse_instance_key(work.key)[3])
        if k not in logged:
            raise NotLogged(f"{case}: the design asked for {work.key} (alpha {k[1]:g}), which the logs do not hold")
        asked.append(k)
        return logged[k][0]

    out = drive(method.tasks(spec["params"], settings, np.random.SeedSequence(12345)), execute)
    grid = grid_estimate(spec, logged, settings)
    cost = sum(logged[k][1] for k in asked)
    full = sum(v[1] for k, v in logged.items() if k[0] in spec["sizes"] and lo - 1e-9 <= k[1] <= hi + 1e-9
               and k[2] < 16)
    alphas = np.linspace(lo, hi, n)
    print(f"== {case}: sizes {spec['sizes']}, seeds {n_seeds} -> at most {max_seeds}, target s.e. {target:g}, "
          f"margin {margin:g}")
    for si, d in enumerate(spec["sizes"]):
        a, b = out[f"{t}_step_lo"][si], out[f"{t}_step_hi"][si]
        print(f"  d = {d:5d}: alphas {alphas[a]:.3f} .. {alphas[b]:.3f} ({b - a + 1} of {n}), "
              f"{out[f'{t}_n_seeds'][si]} seeds; onset {out[f'{t}_gamp_d'][si]:.4f} +- {out[f'{t}_gamp_d_se'][si]:.4f}"
              f" (grid {grid['d'][si]:.4f} +- {grid['d_se'][si]:.4f})")
    exact = spec["exact"]
    off = "" if exact is None else f", {(out[f'{t}_gamp'] - exact) / out[f'{t}_gamp_se']:+.2f} s.e. from {exact}"
    goff = "" if exact is None else f", {(grid['inf'] - exact) / grid['se']:+.2f} s.e. from {exact}"
    print(f"  design: {out[f'{t}_gamp']:.4f} +- {out[f'{t}_gamp_se']:.4f} (chi2 {out[f'{t}_gamp_chi2']:.2f}){off}; "
          f"{out[f'{t}_rounds']} rounds; {len(asked)} instances, {cost:.0f} of the grid's {full:.0f} CPU-s "
          f"({cost / full:.1%})")
    print(f"  grid (16 seeds, every alpha): {grid['inf']:.4f} +- {grid['se']:.4f} (chi2 {grid['chi2']:.2f}){goff}")
    return out


def method_defaults(method):
    return {k: (list(p.default) if isinstance(p.default, (list, tuple)) else p.default)
            for k, p in method.settings.items()}


def grid_estimate(spec, logged, settings):
    """The rule on the full grid of the logs (16 seeds at every alpha of the window at every size), with the
    bootstrap draws of a grid point (rng of the point's stream), for the comparison."""
    lo, hi, n = spec["window"]
    alphas = np.linspace(lo, hi, n)
    obs = get_model(spec["model"]).method("onset").transitions[spec["transition"]]
    table = np.array([[[logged[(d, round(float(a), 9), s)][0][obs] for s in range(16)] for a in alphas]
                      for d in spec["sizes"]])
    values, ses = onset.onsets_by_size(alphas, table, spec["sizes"], level=settings["level"],
                                       rng=np.random.default_rng(0))
    inf, se, chi2 = onset.extrapolate(spec["sizes"], values, ses, settings["correction"])
    return {"d": values, "d_se": ses, "inf": inf, "se": se, "chi2": chi2}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", nargs="*", choices=tuple(CASES), default=list(CASES))
    ap.add_argument("--seeds", type=int, default=16, help="seeds per alpha to start (n_seeds)")
    ap.add_argument("--max-seeds", type=int, default=16)
    ap.add_argument("--target", type=float, default=0.0, help="s.e. at which the design stops adding seeds")
    ap.add_argument("--margin", type=float, default=0.05, help="the design's margin (end_doubts)")
    ap.add_argument("--high-end", choices=tuple(HIGH_END), default="next-resample",
                    help="the rule that settles a window's high end")
    a = ap.parse_args(argv)
    onset.end_doubts = HIGH_END[a.high_end]  # the design reads it from the module at each decision
    for case in a.case:
        try:
            replay(case, a.seeds, a.max_seeds, a.target, a.margin)
        except NotLogged as exc:
            print(exc.args[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
