"""What a running onset point has done so far, from the works its store keeps (results/parts.py): per
transition, size and alpha step, the seeds run, the mean watched overlap against the level 2/sqrt(d) and how
many instances lie above it, how many the stopping rule ended, the mean iterations, and the works' kept time
(their workers' wall time: CPU-s only where a worker had its core to itself).

    python benchmarks/onset_progress.py --store STORE [--sweep smi-thresholds-gamp]

The store must hold one pending point of the sweep (e.g. `seqphase run smi-thresholds-gamp --set skip=0.1`
while it runs, or after it was stopped).
"""

from __future__ import annotations

import argparse
import collections
import math
import sys

from seqphase.core import onset
from seqphase.core.models import get_model
from seqphase.results.parts import Parts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--sweep", default="smi-thresholds-gamp")
    ap.add_argument("--model", default="smi")
    a = ap.parse_args(argv)
    parts = Parts(a.store, a.sweep)
    points = parts.points()
    if len(points) != 1:
        print(f"onset_progress.py: {a.store} keeps works of {len(points)} points of {a.sweep}, not one",
              file=sys.stderr)
        return 2
    transitions = get_model(a.model).method("onset").transitions
    cells, total = collections.defaultdict(list), 0.0
    for key, kept in parts.load_kept(points[0]).items():
        t, d, j, _ = onset.parse_instance_key(key)
        cells[(t, d, j)].append((kept.result, (kept.meta or {}).get("runtime_s", 0.0)))
    for (t, d, j), rows in sorted(cells.items()):
        values = [r[transitions[t]] for r, _ in rows]
        level = 2.0 / math.sqrt(d)
        seconds = sum(s for _, s in rows)
        total += seconds
        print(f"{t} d = {d} step {j}: {len(rows)} seeds, mean {sum(values) / len(values):.4f} (level {level:.4f}, "
              f"{sum(v > level for v in values)} above), stopped {sum(int(r.get('stopped', 0)) for r, _ in rows)}, "
              f"iterations {sum(r['n_iter'] for r, _ in rows) / len(rows):.0f}, {seconds:.0f} s of work")
    print(f"{sum(len(r) for r in cells.values())} works, {total:.0f} s of work")
    return 0


if __name__ == "__main__":
    sys.exit(main())
