"""Driver throughput and store scaling, printed as the tables of docs/benchmarks.md.

    python benchmarks/store_scaling.py [--points 4000] [--big 100000] [--workers 1,2] [--skip-big] [--no-fsync]
                                       [--insecure-no-tls] [--keep DIR]

1. `glm-perceptron-se --set alpha=0.1:5:POINTS` from scratch on 1 and 2 local workers: sweep wall time
   (first submission to last point stored, consolidation included), summed point runtime (the ledger's
   runtime_s), parallel efficiency = summed runtime / (wall x workers), the driver's peak RSS; then the
   store's files and bytes, and `seqphase query` (a subprocess: wall time and peak RSS). The driver's
   flushes are timed (count, total seconds); `--no-fsync` runs the same code with the fsyncs of
   results/durable.py skipped, which is what durable "done" costs. The local cluster speaks TLS, as every
   run's does; `--insecure-no-tls` runs it on plain tcp://, which is what TLS costs.
2. The same sweep's store at BIG points: the 4,000 computed points' values written again and again
   (point i gets point i mod 4000's arrays) through the driver's batched writer, so the store holds
   real per-point bytes; files, bytes, writer time per point, and `seqphase query` time and peak RSS.
3. The driver on a BIG-point plan, end to end: `ClosedForm` below (a closed form, ~10 us a point; the
   workers import it from this file, which the driver's spawned workers find on the path they inherit) on 2
   workers, for the driver's peak RSS and its time per point.

Every measurement runs in a fresh process; the machine's load is printed beside each. The stores go to a
temporary folder, removed at the end, or to --keep DIR (which must not hold them already: every run starts
from an empty store).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import harness
from harness import peak_rss_mb
from seqphase.core.models import REQUIRED, Layout, Method, Model, Param, Variable


class ClosedFormSE(Method):
    """overlap = alpha / (1 + alpha) and three draws of the point's stream: a point costs microseconds, so a
    run of many points measures the driver, the scheduler and the store. The layout (and so the bytes a point
    stores) is that of the engine tests' toy model, tests/toymodel.py, which the docs' figures were measured on."""

    def layout(self, settings):
        return Layout({"row": np.arange(1, 2), "col": np.arange(1, 2), "seed": np.arange(3)},
                      {"overlap": Variable(("row", "col"), "f8", "alpha/(1+alpha)"),
                       "gen_error": Variable((), "f8", "1 - overlap"),
                       "noise": Variable(("seed",), "f8", "three draws of the point's stream")})

    def run(self, params, settings, seed_sequence):
        value = params["alpha"] / (1.0 + params["alpha"])
        noise = np.random.default_rng(seed_sequence).standard_normal(3)
        return {"overlap": np.full((1, 1), value), "gen_error": 1.0 - value, "noise": noise}


class ClosedForm(Model):
    def __init__(self):
        super().__init__(name="store_scaling:ClosedForm", description="a closed form, to time the driver alone",
                         params={"alpha": Param("alpha", "float", "sample complexity", REQUIRED, low=0.0)},
                         methods={"se": ClosedFormSE({}, version=1, doc="closed form")})


def load():
    return "load %.2f %.2f %.2f" % os.getloadavg()


def child(kind, **kw):
    """Run one measurement in a fresh Python process; returns its JSON."""
    out = subprocess.run([sys.executable, __file__, "_child", kind, json.dumps(kw)], capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{kind} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def fresh(path):
    """`path` for a new store: refused when it exists (each measurement starts from an empty store)."""
    if path.exists():
        sys.exit(f"{path} exists: give --keep a folder without the benchmark's stores")
    return path


def store_size(path):
    files = [p for p in Path(path).rglob("*") if p.is_file() and p.name != ".seqphase-driver.lock"]
    return len(files), sum(p.stat().st_size for p in files), sum(p.stat().st_blocks * 512 for p in files)


def query(store, sweep):
    """`seqphase query` in a subprocess under /usr/bin/time: (seconds, peak RSS MB, rows)."""
    with tempfile.NamedTemporaryFile(suffix=".csv") as csv:
        started = time.perf_counter()
        out = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, "-m", "seqphase.cli", "query", sweep,
                              "--store", str(store), "-o", csv.name], capture_output=True, text=True)
        wall = time.perf_counter() - started
        if out.returncode:
            sys.exit(out.stderr)
        rows = sum(1 for _ in open(csv.name)) - 1
    return wall, int(out.stderr.strip().splitlines()[-1]) / 1024, rows


# -- children -------------------------------------------------------------------------------------------
def run_sweep_child(spec, overrides, workers, store, fsync=True, tls=True):
    from seqphase.cluster import connect, run_sweep
    from seqphase.cluster.security import Access
    from seqphase.results import durable
    from seqphase.results.store import DONE, Store
    from seqphase.results.writer import BatchWriter

    durable.FSYNC = fsync
    flushes = []
    real_flush = BatchWriter.flush

    def timed_flush(self):
        began = time.perf_counter()
        try:
            return real_flush(self)
        finally:
            flushes.append(time.perf_counter() - began)

    BatchWriter.flush = timed_flush
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    plan = plan_sweep(load_sweep(spec, overrides=overrides))
    with connect("local", workers=workers, access=Access(insecure=not tls)) as client:
        group = Store(store).prepare(plan)
        summary = run_sweep(plan, group, client, progress=False)
    status = group.read("status")
    runtime = float(group.read("runtime_s")[status == DONE].sum())
    return {"points": len(plan.points), "done": summary.done, "failed": summary.failed, "wall": summary.elapsed_s,
            "runtime": runtime, "efficiency": runtime / (summary.elapsed_s * workers), "rss_mb": peak_rss_mb(),
            "flushes": len(flushes), "flush_s": sum(flushes)}


def fill_child(source, store, points):
    """Write `points` points of the source sweep's layout through the batched writer."""
    from seqphase.results.store import DONE, Store
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    src = Store(source).open_sweep("glm-perceptron-se")
    n_src = len(src.coords["alpha"])
    data = {name: src.read(name).reshape((n_src,) + src.arrays[name].shape[len(src.dims):])
            for name in src.variables}
    meta = {"runtime_s": 0.01, "host": "bench", "worker": "tcp://bench", "slurm_job_id": ""}
    plan = plan_sweep(load_sweep("glm-perceptron-se", overrides=[f"alpha=0.1:5:{points}"]))
    group = Store(store).prepare(plan)
    writer = group.writer()
    started = time.perf_counter()
    writer.mark_pending([(group.index_of(p), p.hash) for p in plan.points])
    for i, point in enumerate(plan.points):
        writer.done(group.index_of(point), point.hash, {k: v[i % n_src] for k, v in data.items()}, meta)
        if len(writer) >= 2000:
            writer.flush()
    writer.flush()
    write_s = time.perf_counter() - started
    group.store.consolidate()
    return {"points": points, "write_s": write_s, "per_point_ms": 1e3 * write_s / points,
            "done": int((group.read("status") == DONE).sum()), "rss_mb": peak_rss_mb(),
            "check": bool(np.array_equal(group.read("overlap").reshape(points, -1)[:n_src],
                                         data["overlap"].reshape(n_src, -1), equal_nan=True))}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        kind, kw = sys.argv[2], json.loads(sys.argv[3])
        result = {"sweep": run_sweep_child, "fill": fill_child}[kind](**kw)
        print(json.dumps(result))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=4000)
    parser.add_argument("--big", type=int, default=100_000)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--skip-big", action="store_true")
    parser.add_argument("--keep", default=None, help="keep the stores in this folder")
    parser.add_argument("--no-fsync", action="store_true", help="skip the fsyncs (to measure their cost)")
    parser.add_argument("--insecure-no-tls", action="store_true", help="plain tcp:// instead of TLS (to measure its cost)")
    args = parser.parse_args()
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        return measure(args, Path(args.keep))
    with tempfile.TemporaryDirectory(prefix="seqphase-bench-") as folder:
        return measure(args, Path(folder))


def measure(args, folder):
    harness.print_machine()
    print(f"# glm-perceptron-se --set alpha=0.1:5:{args.points}" + (" (fsync skipped)" if args.no_fsync else "")
          + (" (plain tcp://, no TLS)" if args.insecure_no_tls else " (TLS)"))
    print("| workers | points | wall s | summed runtime s | efficiency | flushes (s) | driver peak MB | load (1, 5, 15 min) |")
    print("|---|---|---|---|---|---|---|---|")
    stores = {}
    for workers in (int(w) for w in args.workers.split(",")):
        store = fresh(folder / f"se-{args.points}-w{workers}.zarr")
        before = load()
        r = child("sweep", spec="glm-perceptron-se", overrides=[f"alpha=0.1:5:{args.points}"], workers=workers,
                  store=str(store), fsync=not args.no_fsync, tls=not args.insecure_no_tls)
        assert r["done"] == args.points and r["failed"] == 0, r
        stores[workers] = store
        print(f"| {workers} | {r['points']} | {r['wall']:.1f} | {r['runtime']:.1f} | {r['efficiency']:.2f} | "
              f"{r['flushes']} ({r['flush_s']:.1f}) | {r['rss_mb']:.0f} | before {before}, after {load()} |", flush=True)
    store = stores[max(stores)]
    files, size, disk = store_size(store)
    wall, rss, rows = query(store, "glm-perceptron-se")
    print(f"\nstore at {args.points} points: {files} files, {size / 1e6:.1f} MB ({disk / 1e6:.1f} MB on disk); "
          f"query {wall:.2f} s, peak {rss:.0f} MB, {rows} rows ({load()})", flush=True)
    if args.skip_big:
        return 0
    big = fresh(folder / f"se-{args.big}.zarr")
    r = child("fill", source=str(store), store=str(big), points=args.big)
    assert r["check"] and r["done"] == args.big, r
    files, size, disk = store_size(big)
    wall, rss, rows = query(big, "glm-perceptron-se")
    print(f"store at {args.big} points: {files} files, {size / 1e6:.1f} MB ({disk / 1e6:.1f} MB on disk); "
          f"batched writer {r['per_point_ms']:.3f} ms/point (peak {r['rss_mb']:.0f} MB); "
          f"query {wall:.2f} s, peak {rss:.0f} MB, {rows} rows ({load()})", flush=True)
    spec_file = folder / "closed-form.toml"
    harness.write_text(spec_file, f'name = "closed-form"\nmodel = "store_scaling:ClosedForm"\nseed = 7\n[params]\n'
                                  f'alpha = {{ start = 0.1, stop = 5.0, num = {args.big} }}\n[method]\nname = "se"\n')
    before = load()
    r = child("sweep", spec=str(spec_file), overrides=[], workers=2, store=str(fresh(folder / "closed-form.zarr")))
    assert r["done"] == args.big, r
    print(f"driver on a {args.big}-point plan (closed form, 2 workers): wall {r['wall']:.1f} s = "
          f"{1e3 * r['wall'] / args.big:.2f} ms/point, driver peak {r['rss_mb']:.0f} MB "
          f"(before {before}, after {load()})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
