"""The `smi-thresholds-gamp` points stored in one or more stores, one row per skip: what each cost and what it
found, for the table of docs/validation/smi.md that sets the default design beside the grid's points.

    python benchmarks/smi_onset_skips.py STORE [STORE ...] [--markdown] [--first-seeds N] [--against LOG ...]

Every done point of the sweep in each store (any skip; a skip found in two stores is an error) gives:
- its CPU-s of work (the point's stored runtime_s, the figure `seqphase status` sums) and its instances (those
  that ran: n_iter >= 0, both transitions);
- per transition, the seeds per size, the stored per-size onsets, and the extrapolation d -> infinity under
  the default correction (d^-1/3, as stored: alpha_gamp +- alpha_gamp_se, chi2), with the d^-1/2 and d^-1
  estimates recomputed from the same per-size onsets (core/onset.py `extrapolate`) as a range;
- the onset method's version the point was computed with;
- with --first-seeds N, each transition's per-size onsets recomputed on seeds 0 .. N-1 alone (the seeds of a
  grid point of n_seeds = N, on the same streams): whether a design moved the grid's onsets;
- with --against LOG (one store; a log of one skip's instances as `benchmarks/smi_onset.py` writes it, e.g.
  benchmarks/data/onset/smi-c0.0001-alpha1-v3.jsonl), the stored instances set beside the logged ones of
  the same key (transition, size, alpha step, seed): how many the watched |M| differs for by more than 0.01,
  how many of those the stopping rule stopped early, and how many sit on the other side of the level.
The last line sums the CPU-s and instances. Nothing is run: the stores are only read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

import harness
from seqphase.core import onset

SWEEP = "smi-thresholds-gamp"
TRANSITIONS = ("alpha1", "alpha2")


def first_seed_onsets(at, sizes, t, n, level):
    """The per-size onsets of transition `t` of one stored point `at` recomputed from its first `n` seeds only
    (those a grid point of n_seeds = n runs on the same streams), on the alphas the point ran at each size,
    with the point's `level`."""
    from seqphase.core.models import get_model

    watched = get_model("smi").method("onset").transitions[t]  # the observable the transition reads
    alphas, observable = at[f"{t}_alpha"].values, at[f"{t}_{watched}"].values
    out = []
    for i, d in enumerate(sizes):
        lo, hi = int(at[f"{t}_step_lo"][i]), int(at[f"{t}_step_hi"][i])
        try:
            value, _ = onset.onset_at_size(alphas[lo:hi + 1], observable[i, lo:hi + 1, :n], d, level=level,
                                           rng=np.random.default_rng(0))
        except onset.OnsetWindowError:
            value = float("nan")
        out.append(value)
    return out


def against_log(store, paths):
    """Lines setting the stored instances of the one done point in `store` beside the logged instances in
    `paths` (jsonl, one instance a line, keyed '<transition>-d<size>-a<step>-s<seed>')."""
    from seqphase.core.models import get_model
    from seqphase.results.query import open_results

    ds = open_results(SWEEP, store=store)
    if ds.sizes["skip"] != 1:
        raise ValueError(f"--against compares one skip's point; {store} holds {ds.sizes['skip']} skips")
    at = ds.squeeze(drop=True)
    level = json.loads(ds.attrs["settings"])["level"]
    sizes = [int(d) for d in ds["size"].values]
    logged = {}
    for path in paths:
        if not Path(path).is_file():
            raise FileNotFoundError(f"no log {path}")
        logged.update(harness.rows_by_key(path))
    lines = []
    for t, watched in get_model("smi").method("onset").transitions.items():
        new, ran, early = at[f"{t}_{watched}"].values, at[f"{t}_n_iter"].values >= 0, at[f"{t}_stopped"].values
        pairs = []  # (size, step, seed, stored |M|, logged |M|)
        moved = moved_early = crossed = 0
        for (i, a, s), value in np.ndenumerate(new):
            record = logged.get(onset.instance_key(t, sizes[i], a, s))
            if record is None or not ran[i, a, s] or not np.isfinite(value):
                continue
            cut = level / np.sqrt(sizes[i])
            before = abs(record[watched])
            if abs(abs(value) - before) > 0.01:
                moved += 1
                moved_early += bool(early[i, a, s])
            crossed += (abs(value) > cut) != (before > cut)
            pairs.append((sizes[i], a, s, abs(value), before))
        if pairs:
            compared = len(pairs)
            largest = max(pairs, key=lambda o: abs(o[3] - o[4]))
            lines.append(f"  {t}: {compared} instances in both; |{watched}| differs by > 0.01 on {moved} "
                         f"({moved_early} of them stopped early), the other side of the level on {crossed}; "
                         f"largest at d = {largest[0]}, step {largest[1]}, seed {largest[2]}: "
                         f"{largest[3]:.4f} against {largest[4]:.4f}")
    return lines


def rows_of(store, first_seeds=0):
    """{skip: row} of the done points of the sweep in `store` (with `first_seeds` > 0, each transition's
    per-size onsets on its first that many seeds as well)."""
    from seqphase.results.query import open_results
    from seqphase.results.store import DONE

    ds = open_results(SWEEP, store=store)
    version = ds.attrs["algorithm_version"]
    level = json.loads(ds.attrs["settings"])["level"]
    sizes = [int(d) for d in ds["size"].values]
    rows = {}
    for skip in ds["skip"].values:
        at = ds.sel(skip=skip).squeeze(drop=True)
        if int(at["status"]) != DONE:
            continue
        row = {"skip": float(skip), "cpu_s": float(at["runtime_s"]), "version": version, "store": str(store),
               "instances": 0}
        for t in TRANSITIONS:
            ran = at[f"{t}_n_iter"].values >= 0
            row["instances"] += int(ran.sum())
            onsets, ses = at[f"{t}_gamp_d"].values, at[f"{t}_gamp_d_se"].values
            ok = np.isfinite(onsets)
            row[t] = {
                "seeds": [int(n) for n in at[f"{t}_n_seeds"].values],
                "onsets": [float(v) for v in onsets],
                "value": float(at[f"{t}_gamp"]), "se": float(at[f"{t}_gamp_se"]),
                "chi2": float(at[f"{t}_gamp_chi2"]),
                "first": first_seed_onsets(at, sizes, t, first_seeds, level) if first_seeds else None,
                "range": [onset.extrapolate(np.array(sizes)[ok], onsets[ok], ses[ok], c)[0]
                          for c in ("d^-1/2", "d^-1")],
            }
        rows[float(skip)] = row
    return sizes, rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="+", help="zarr stores holding points of the sweep")
    parser.add_argument("--markdown", action="store_true", help="the table of docs/validation/smi.md")
    parser.add_argument("--against", nargs="+", default=[], metavar="LOG",
                        help="one store: its instances beside those of these logs (benchmarks/smi_onset.py's jsonl)")
    parser.add_argument("--first-seeds", type=int, default=0, metavar="N",
                        help="also the per-size onsets on seeds 0 .. N-1 alone (a grid point's seeds at n_seeds = N)")
    args = parser.parse_args(argv)
    from seqphase.core.errors import SeqphaseError

    every, sizes = {}, None
    for store in args.stores:
        try:
            these, rows = rows_of(store, args.first_seeds)
        except SeqphaseError as exc:
            print(f"smi_onset_skips.py: {exc.one_line()}", file=sys.stderr)
            return 2
        if sizes is not None and these != sizes:
            print(f"smi_onset_skips.py: {store} ran sizes {these}, another store {sizes} (fix: one design per table)",
                  file=sys.stderr)
            return 2
        sizes = these
        for skip, row in rows.items():
            if skip in every:
                print(f"smi_onset_skips.py: skip {skip:g} is done in {every[skip]['store']} and in {store} "
                      "(fix: name each skip's store once)", file=sys.stderr)
                return 2
            every[skip] = row
    if not every:
        print("smi_onset_skips.py: no done point of smi-thresholds-gamp in these stores", file=sys.stderr)
        return 2
    sizes_text = " / ".join(map(str, sizes))
    if args.markdown:
        print(f"| c | α₁ onset at d = {sizes_text} | α₁ (d^−1/2 – d^−1) | α₂ onset at d = {sizes_text} "
              "| α₂ (d^−1/2 – d^−1) | instances | CPU-s of work |")
        print("|---|---|---|---|---|---|---|")
    for skip in sorted(every):
        row = every[skip]
        cells = []
        for t in TRANSITIONS:
            r = row[t]
            cells.append(" / ".join(f"{v:.3f}" for v in r["onsets"]))
            cells.append(f"{r['value']:.3f} ± {r['se']:.3f} ({min(r['range']):.3f} – {max(r['range']):.3f})")
        if args.markdown:
            print(f"| {skip:g} | " + " | ".join(cells) + f" | {row['instances']} | {row['cpu_s']:,.0f} |")
        else:
            print(f"c = {skip:g} ({row['version']}): "
                  f"{row['cpu_s']:,.0f} CPU-s of work, {row['instances']} instances")
            for t, (onsets, value) in zip(TRANSITIONS, zip(cells[0::2], cells[1::2])):
                seeds = " / ".join(map(str, row[t]["seeds"]))
                print(f"  {t}: onsets at d = {sizes_text}: {onsets} (seeds {seeds}); d -> inf: {value}, "
                      f"chi2 {row[t]['chi2']:.1f}")
                if row[t]["first"] is not None:
                    first = " / ".join(f"{v:.3f}" for v in row[t]["first"])
                    print(f"  {t}: onsets on seeds 0-{args.first_seeds - 1} alone: {first}")
    if args.against:
        if len(args.stores) != 1:
            print("smi_onset_skips.py: --against compares one store (fix: name one)", file=sys.stderr)
            return 2
        try:
            print(f"against {', '.join(args.against)}:", *against_log(args.stores[0], args.against), sep="\n")
        except (OSError, ValueError, KeyError) as exc:
            print(f"smi_onset_skips.py: --against: {exc}", file=sys.stderr)
            return 2
    total_cpu = sum(r["cpu_s"] for r in every.values())
    total_n = sum(r["instances"] for r in every.values())
    print(f"{len(every)} skips: {total_cpu:,.0f} CPU-s of work, {total_n} instances")
    return 0


if __name__ == "__main__":
    sys.exit(main())
