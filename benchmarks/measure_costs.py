"""The cost of every shipped sweep and of every paper's reproduction, in one unit: CPU-s of work and wall
seconds on 2 workers.

    python benchmarks/measure_costs.py [--only NAME ...] [--papers | --no-papers] [--long]
                                       [--out DIR] [--write-costs]

Sweeps run on one local cluster of 2 workers (`seqphase.run(..., client=...)`), each into a fresh store
under --out (default benchmarks/out/costs, which git ignores). A sweep in SUBSETS runs only the points its
`--set` overrides select (k of its n points, spread over every axis whose cost varies, at the spec's
per-point settings); its CPU-s is then the run's work per point times n, "estimated from k of n points".
Every other sweep runs whole. CPU-s = user + system time of the driver and the 2 worker processes over the
run (getrusage, asked of each worker through the client before and after), which other jobs on the same
cores do not inflate; from the run record the driver stores (`Store(path).open_sweep(name).attrs["runs"][-1]`):
`chain_s` (the longest chain of one point's works), `elapsed_s` (the run's wall) and, as a check, `work_s`
(the works' wall seconds on their workers summed, which `seqphase status` prints).

Sweeps in LONG (half an hour or more on 2 workers, even on a subset) run only with --long (or --only NAME);
without it their record in sweeps/costs.toml is kept as it is. --task-logs derives their records from the
task logs of `python benchmarks/parallelism.py` (--logs, default benchmarks/data/parallelism/NAME.jsonl) instead,
and says so in each record's `source` (with --only, for the sweeps it names). The stored names of a paper that run a
spec with other overrides (a published grid, fixed parameters) are measured too, whole, as `runs.NAME`.
A point that fails stops early, so a record whose measured points include one says so (`failed`).

Papers (--papers): `seqphase reproduce ID --quick --workers 2` whole, as a child process into a fresh store;
wall from the clock, CPU-s = user + system of the process tree (getrusage of the children). A paper's full
reproduction is every one of its runs at spec size, so its cost is the sum of its runs' records
(`seqphase.sweeps.costs.full_cost`), not a run of its own.

Results go to OUT/measured.json. Tracked files change only with --write-costs, which merges them into
sweeps/costs.toml (the records of sweeps not run this time are kept).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import harness

COMMAND = "python benchmarks/measure_costs.py"

#: sweep -> the --set overrides of the points measured (k of n, spread across the axes whose cost varies)
SUBSETS = {
    "aim-gamp": ["channel=softmax,hardmax", "alpha=0.3"],
    "aim-gamp-hardmax": ["hardmax_gout=exact,paper", "alpha=1.0"],
    "aim-gamp-tokens": ["T=4,5", "alpha=0.012"],
    "aim-gd": ["alpha=0.125"],
    "bsr-gamp": ["rho=0.5,1.0", "alpha=0.6"],
    "bsr-gd": ["alpha=0.1,0.5"],
    "multiindex-gamp": ["channel=z1z2,sign-z1z2", "alpha=2.0"],
    "multiindex-staircase-se": ["alpha=0.2,2.0,4.0"],
    "quadratic-erm-experiment": ["kappa=0.5,2.0", "delta=0.5", "alpha=0.05,0.7"],
    "quadratic-erm-thresholds": ["kappa_star=0.1,2.0"],
    "quadratic-gamp": ["delta=0,0.25", "alpha=0.075,0.5"],
    "quadratic-gd": ["alpha=0.0154,0.373"],
    "smi-2layer-gamp": ["alpha=0.8"],
    "smi-2layer-se": ["alpha=0.2,0.6,1.0,1.2,1.4,1.6"],
    "smi-2layer-se-noiseless": ["alpha=1.2", "method.eps=1e-3,1e-5"],
    "smi-3layer-se-noiseless": ["alpha=2.0", "method.eps=1e-3"],
    "smi-thresholds-noiseless": ["skip=0.01,1.0"],
}

#: sweeps whose representative subset takes half an hour or more on 2 workers (an onset point; smi-3layer-se's
#: costly alphas; smi-thresholds' small skips): only with --long, or --task-logs
LONG = {
    "smi-thresholds-gamp": [],
    "smi-3layer-se": ["alpha=0.5,2.0"],
    "smi-thresholds": ["skip=0.01,1.0"],
    "glm-phase-retrieval-onset": [],
    "multiindex-z1z2-onset": [],
}

TASK_LOGS = harness.DATA / "parallelism"
ONSET_SWEEPS = ("glm-phase-retrieval-onset", "multiindex-z1z2-onset")


def from_task_log(name, logs=TASK_LOGS):
    """The record of a LONG sweep from its task log (`python benchmarks/parallelism.py measure`, or
    `from-onset-runs` for the onset sweeps: the grid's instances timed by the onset validation runs): the
    works' seconds of its m logged points, per point times n; None without a log."""
    from seqphase.sweeps.spec import load_sweep

    log = Path(logs).resolve() / f"{name}.jsonl"
    rows = harness.read_jsonl(log)
    if not rows:
        return None
    work = sum(t for row in rows for stage in row["stages"] for t in stage)
    chain = max(sum(max(stage) for stage in row["stages"]) for row in rows)
    full = points(load_sweep(name))
    return {"points": full, "cpu_s": round(work / len(rows) * full, 1), "chain_s": round(chain, 1),
            "measured_points": len(rows), "measured_work_s": round(work, 1),
            "how": "whole" if len(rows) == full else f"estimated from {len(rows)} of {full} points",
            "command": "python benchmarks/parallelism.py from-onset-runs" if name in ONSET_SWEEPS else
            f"python benchmarks/parallelism.py measure --only {name}",
            "source": f"not rerun here: the task log {_shown(log)}, " + (
                "the grid's instances timed by the onset validation runs (CPU-s)" if name in ONSET_SWEEPS else
                "the works' seconds on their workers (an upper bound where other jobs shared the cores)")}


def _shown(path):
    """A path as the records show it: relative to the checkout where it lies inside it."""
    try:
        return str(path.relative_to(harness.ROOT))
    except ValueError:
        return str(path)


def points(sweep):
    """The points of a loaded sweep: its parameter grid times its setting axes."""
    return math.prod(len(v) for v in sweep.params.values()) * math.prod(
        len(v) for v in sweep.setting_axes.values())


def paper_variants():
    """{stored name: (spec, --set overrides)} of the paper runs that are not a shipped sweep as it is."""
    from seqphase.sweeps.papers import PAPERS

    out = {}
    for paper in PAPERS.values():
        for run in paper.runs:
            sets = run.overrides(quick=False)
            if sets or run.stored_name(False) != run.spec:
                shown = list(run.full) + ([f"alpha=<the alphas of {run.published_grid[1]}>"]
                                          if run.published_grid else [])
                out[run.stored_name(False)] = (run.spec, sets, shown)
    return out


def measure_sweep(name, spec, sets, whole_sets, client, out, shown=None):
    """Run `spec` with `sets` into a fresh store; its record (points, cpu_s, wall_s, chain_s, how, command)."""
    import seqphase
    from seqphase.results.store import Store
    from seqphase.sweeps.spec import load_sweep

    full = points(load_sweep(spec, overrides=whole_sets))
    run_points = points(load_sweep(spec, overrides=sets))
    store = out / "stores" / f"{name}.zarr"
    shutil.rmtree(store, ignore_errors=True)  # a fresh store: nothing kept from an earlier run
    cpu_before = tree_cpu(client)
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        seqphase.run(spec, set=list(sets), name=name, store=store, client=client, progress=False)
    wall = time.perf_counter() - started
    failures = [str(w.message) for w in caught if "failed" in str(w.message)]
    cpu = tree_cpu(client) - cpu_before
    record = Store(store).open_sweep(name).attrs["runs"][-1]
    whole = run_points == full and list(sets) == list(whole_sets)
    sets_text = "".join(f" --set {s}" for s in (sets if shown is None else shown))
    rec = {"points": full, "cpu_s": round(cpu / run_points * full, 1),
           "chain_s": round(record.get("chain_s", 0.0), 1), "measured_points": run_points,
           "measured_cpu_s": round(cpu, 1),
           "measured_work_s": round(record["work_s"], 1), "measured_wall_s": round(record.get("elapsed_s", wall), 1),
           "how": "whole" if whole else f"estimated from {run_points} of {full} points",
           "command": f"seqphase run {spec}{sets_text} --workers 2" + (f" --name {name}" if name != spec else "")}
    if whole:
        rec["wall_s"] = rec["measured_wall_s"]
    if failures:  # a failed point stops early: the figure is then a lower bound
        rec["failed"] = "; ".join(failures)
    return rec


def _own_cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def tree_cpu(client):
    """CPU-s (user + system) so far of this process and of every worker process of `client`: unlike the
    works' seconds of the run record (each work's wall on its worker), other jobs on the cores do not
    inflate it."""
    return _own_cpu() + sum(client.run(_own_cpu).values())


def measure_paper(paper_id, out):
    """`seqphase reproduce ID --quick --workers 2` whole, in a child process: wall and CPU-s of the tree."""
    store, report = out / "papers" / f"{paper_id}.zarr", out / "papers" / f"{paper_id}-report"
    for path in (store, report):
        shutil.rmtree(path, ignore_errors=True)
    command = [sys.executable, "-m", "seqphase.cli", "reproduce", paper_id, "--quick", "--workers", "2",
               "--store", str(store), "-o", str(report), "--no-progress"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "workers": 2,
            "command": f"seqphase reproduce {paper_id} --quick --workers 2"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="these sweeps, stored names or paper ids only")
    parser.add_argument("--papers", action="store_true", help="the papers' --quick reproductions only")
    parser.add_argument("--no-papers", action="store_true", help="the sweeps only")
    parser.add_argument("--long", action="store_true", help="also the sweeps of LONG (hours)")
    parser.add_argument("--resume", action="store_true", help="skip what OUT/measured.json holds already")
    parser.add_argument("--task-logs", action="store_true",
                        help="the sweeps of LONG (or of --only) from their task logs (--logs), not run")
    parser.add_argument("--logs", type=Path, default=TASK_LOGS,
                        help="the folder of the task logs (default: benchmarks/data/parallelism)")
    parser.add_argument("--out", type=Path, default=harness.out_path("costs"), help="results and stores")
    parser.add_argument("--write-costs", action="store_true", help="merge OUT/measured.json into sweeps/costs.toml")
    args = parser.parse_args(argv)
    results_file = harness.writable(args.out / "measured.json")
    results = json.loads(results_file.read_text()) if results_file.exists() else {}
    results.setdefault("sweeps", {})
    results.setdefault("runs", {})
    results.setdefault("papers", {})
    results["machine"] = harness.machine()

    def save():
        harness.write_text(results_file, json.dumps(results, indent=1, sort_keys=True) + "\n")

    if args.write_costs:
        from seqphase.sweeps.costs import write_costs

        write_costs(results)
        return 0

    wanted = set(args.only) if args.only else None
    if args.task_logs:
        for name in sorted(wanted) if wanted else LONG:
            rec = from_task_log(name, args.logs)
            if rec:
                results["sweeps"][name] = rec
                print(f"{name}: {rec['cpu_s']} CPU-s ({rec['how']}, from its task log)", flush=True)
        save()
        return 0
    harness.print_machine()
    if not args.papers:
        from seqphase.api import list_sweeps
        from seqphase.cluster import connect

        jobs = []
        for sweep in list_sweeps():
            name = sweep["name"]
            if name in LONG and not args.long and not (wanted and name in wanted):
                continue
            jobs.append(("sweeps", name, name, SUBSETS.get(name, LONG.get(name, [])), [], None))
        for name, (spec, sets, shown) in paper_variants().items():
            jobs.append(("runs", name, spec, sets, sets, shown))
        jobs = [j for j in jobs if (wanted is None or j[1] in wanted)
                and not (args.resume and j[1] in results[j[0]])]
        with connect("local", workers=2) as client:
            for table, name, spec, sets, whole_sets, shown in jobs:
                rec = measure_sweep(name, spec, sets, whole_sets, client, args.out, shown)
                results[table][name] = rec
                save()
                print(f"{name}: {rec['cpu_s']} CPU-s ({rec['how']}; measured {rec['measured_cpu_s']} CPU-s, "
                      f"{rec['measured_wall_s']} s wall)", flush=True)
    if not args.no_papers:
        from seqphase.sweeps.papers import PAPERS

        for paper_id in PAPERS:
            if (wanted and paper_id not in wanted) or (args.resume and paper_id in results["papers"]):
                continue
            rec = measure_paper(paper_id, args.out)
            results["papers"][paper_id] = rec
            save()
            print(f"paper {paper_id} --quick: wall {rec['wall_s']} s, {rec['cpu_s']} CPU-s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
