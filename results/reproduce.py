"""After `seqphase reproduce` has run a paper's sweeps: open them, draw one figure per sweep, compute the
agreement table (results/report.py) and write the report folder (index.html, agreement.csv, figures/).

The folder is written beside itself first (a new folder .DIR.<random>.partial that this run creates) and
swapped in at the end, so a report folder is always whole; a previous report in DIR (it holds the marker
file) is replaced. Only folders this run created are removed: an existing DIR.partial or DIR.old (someone
else's) is left alone.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import numpy as np

from seqphase.results import report
from seqphase.results.plot import done_only, make_figure
from seqphase.results.query import open_results
from seqphase.results.store import DONE, git_revision


def write(paper, quick, store, out, plans, timings):
    out = Path(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))  # ours alone
    try:
        rows = _write(paper, quick, store, out, plans, timings, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
        os.rename(out, old)  # onto the empty folder just made: the name is ours
        os.rename(tmp, out)
        shutil.rmtree(old)
    else:
        os.rename(tmp, out)
    return rows


def _write(paper, quick, store, out, plans, timings, tmp):
    (tmp / "figures").mkdir()
    names = {plan.sweep.name: run for run, plan in plans}
    opened = {name: open_results(name, store.path) for name in names}
    by_spec = {}
    for run, plan in plans:  # a spec's own run (not a published-grid companion) answers to the spec's name
        if not run.name:
            by_spec[run.spec] = plan.sweep.name
    results = {}
    for name, ds in opened.items():
        run = names[name]
        masked = done_only(ds)
        results[run.name or run.spec] = masked
    figures = []
    for run, plan in plans:
        name = plan.sweep.name
        companions = {}
        for role, spec in json.loads(opened[name].attrs.get("plot", "{}")).items():
            if role.endswith("_sweep") and by_spec.get(spec) in opened:
                companions[role] = opened[by_spec[spec]]
        png = f"figures/{name}.png"
        try:
            fig = make_figure(opened[name], companions)
        except Exception as exc:  # noqa: BLE001 -- a figure that cannot be drawn is reported on the page
            figures.append((run, None, f"no figure: {report_text(exc)}"))
            continue
        fig.savefig(tmp / png, dpi=80)
        import matplotlib.pyplot as plt

        plt.close(fig)
        figures.append((run, png, ""))
    rows = report.agreement(paper, results)
    report.write_csv(rows, tmp / "agreement.csv")
    runs = []
    for run, plan in plans:
        name = plan.sweep.name
        ds = opened[name]
        status = np.asarray(ds["status"].values)
        runtime = np.asarray(ds["runtime_s"].values, dtype=float)
        timing = dict(timings.get(name, {}))
        timing["cpu_s"] = float(np.nansum(runtime[status == DONE]))
        timing.setdefault("wall_s", 0.0)
        timing.setdefault("points", int((status != 0).sum()))
        timing.setdefault("computed", 0)
        timing.setdefault("spec_hash", ds.attrs.get("identity_hash", ""))
        runs.append((run, name, timing))
    from seqphase.version import __version__

    provenance = {"seqphase version": __version__, "git revision": git_revision() or "(not a git checkout)",
                  "size": "quick" if quick else "full", "store": str(store.path.resolve()),
                  "host": socket.gethostname(), "python": sys.version.split()[0], "platform": platform.platform(),
                  "command": "seqphase " + " ".join(sys.argv[1:]) if sys.argv and "seqphase" in sys.argv[0]
                  else f"seqphase reproduce {paper.id}{' --quick' if quick else ''}",
                  "wall s (all sweeps)": f"{sum(t['wall_s'] for _, _, t in runs):.1f}",
                  "CPU s (sum of point times)": f"{sum(t['cpu_s'] for _, _, t in runs):.1f}"}
    report.write_html(tmp / "index.html", paper, quick, figures, rows, provenance, runs)
    (tmp / report.MARKER).write_text(f"seqphase reproduce {paper.id}\n")
    return rows


def report_text(exc):
    return " ".join(str(exc).split())[:200] or type(exc).__name__
