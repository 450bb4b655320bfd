"""What the benchmarks share: where their results go, the line that says which machine measured them, timing,
and the parallel benchmark (a sweep timed on several worker counts).

A script run as `python benchmarks/NAME.py` has this folder on sys.path, so it imports this module as
`import harness`. Results go under OUT (benchmarks/out/, ignored by git) unless the script's `--out` names
another place. DATA (benchmarks/data/) holds the logged runs the docs cite; scripts read it and never write it:
every write goes through `writable`, which refuses a path inside DATA or a file git tracks.

Nothing here imports numpy at module level: a script that wants one BLAS thread calls `single_threaded()`
before it imports numpy.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
DATA = HERE / "data"

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def single_threaded():
    """One BLAS and numba thread in this process (unless the environment says otherwise), so that a timing
    does not depend on how many cores a shared machine hands out. Call it before numpy is imported."""
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, "1")


# -- the machine ----------------------------------------------------------------------------------------------
def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib():
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("nan")


def _commit():
    """The checkout's commit (with "+changes" when the work tree differs from it), or "unknown"."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if head.returncode:
        return "unknown"
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def machine():
    """The machine in one phrase: cores, CPU model and memory."""
    return f"{os.cpu_count()} cores, {_cpu_model()}, {_memory_gib():.0f} GiB"


def machine_line():
    """What measured a benchmark: the machine, its load right now (other jobs on the cores inflate wall
    times), the interpreter and the code."""
    from seqphase.version import __version__

    load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    return (f"machine: {machine()}; load average {load}; Python {platform.python_version()}; "
            f"seqphase {__version__} at {_commit()}")


def print_machine():
    print(machine_line(), flush=True)


# -- timing ---------------------------------------------------------------------------------------------------
def best_time(call, repeat):
    """(the shortest wall time of `repeat` calls, the last call's result)."""
    times, result = [], None
    for _ in range(max(1, repeat)):
        started = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - started)
    return min(times), result


def median_time(call, repeat):
    """The median wall time of `repeat` calls."""
    times = []
    for _ in range(max(1, repeat)):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    times.sort()
    middle = len(times) // 2
    return times[middle] if len(times) % 2 else 0.5 * (times[middle - 1] + times[middle])


def peak_rss_mb():
    """This process's peak resident memory in MB (VmHWM of /proc/self/status; ru_maxrss where there is none,
    which carries the parent's high-water mark across fork/exec)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- results --------------------------------------------------------------------------------------------------
def out_path(*parts):
    """A default output path: OUT/parts (benchmarks/out/..., which git ignores)."""
    return OUT.joinpath(*parts)


def _tracked(path):
    """True when git tracks `path` in this checkout (False outside it, or without git)."""
    try:
        relative = path.relative_to(ROOT)
    except ValueError:
        return False
    try:
        listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--", str(relative)], capture_output=True,
                                text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return bool(listed.stdout.strip())


def writable(path):
    """`path` as a Path whose folder exists, after refusing the data folder and any file git tracks (a
    benchmark's results never overwrite a logged run or a tracked file; pass --out elsewhere)."""
    path = Path(path).resolve()
    if path == DATA or DATA in path.parents:
        raise SystemExit(f"{path} is in {DATA}, the logged data the docs cite, which scripts only read: "
                         "pass --out with another place (default: under benchmarks/out/)")
    if _tracked(path):
        raise SystemExit(f"{path} is a file git tracks: pass --out with another place (default: under "
                         "benchmarks/out/)")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def write_text(path, text):
    writable(path).write_text(text)


def write_json(path, value, indent=None):
    write_text(path, json.dumps(value, indent=indent) + "\n")


def append_jsonl(path, rows):
    """Append rows to a JSON-lines file, one line each, flushed as each is written."""
    with open(writable(path), "a") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
            fh.flush()


def read_jsonl(path):
    """The rows of a JSON-lines file ([] when it does not exist)."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def rows_by_key(path):
    """{row["key"]: row} of a JSON-lines log keyed by instance ({} when it does not exist)."""
    return {row["key"]: row for row in read_jsonl(path)}


# -- the parallel benchmark -----------------------------------------------------------------------------------
def time_sweep(name, overrides, workers, store=None):
    """Run sweep `name` with `--set` overrides on `workers` local workers into a fresh store (a temporary one
    unless `store` is given, which must not exist yet). Returns {points, failed, sweep_s (first submission to
    last point stored, the driver's own time), total_s (cluster start and template included), works, work_s
    (the works' seconds summed), chain_s (the longest chain of one point's works)}."""
    from seqphase.cluster import connect, run_sweep
    from seqphase.results.store import Store
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    plan = plan_sweep(load_sweep(name, overrides=list(overrides)))
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(store) if store else Path(scratch) / "bench.zarr"
        if path.exists():
            raise SystemExit(f"{path} exists: time_sweep runs into a fresh store")
        started = time.perf_counter()
        with connect("local", workers=workers) as client:
            target = Store(path).check(create=True)
            with target.lock():
                group = target.prepare(plan)
                summary = run_sweep(plan, group, client, progress=False)
        total = time.perf_counter() - started
    width = summary.width
    return {"points": len(plan.points), "failed": summary.failed, "sweep_s": summary.elapsed_s, "total_s": total,
            "works": width.get("works", 0), "work_s": width.get("work_s", 0.0), "chain_s": width.get("chain_s", 0.0)}
