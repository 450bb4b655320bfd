"""Own chunk manifest against Icechunk, on the driver's write pattern of the 4,000-point sweep (issue 24).

    python benchmarks/manifest_choice.py SOURCE.zarr [--batch 100] [--keep DIR]

SOURCE.zarr holds `glm-perceptron-se --set alpha=0.1:5:4000`, computed (e.g. by
`benchmarks/store_scaling.py --skip-big --keep DIR`). Its 4,000 points are written again, BATCH points
per flush in plan order (the driver flushes about that many points a second on 2 workers), three ways:
1. seqphase's store: zarr on the local file system, durable writes (fsync) and the chunk manifest;
2. the same without fsync (what durability costs);
3. Icechunk (transactional zarr store with chunk manifests): the same arrays, chunks and codecs, the
   same batched writer, and one commit per flush (the commit is what makes a batch visible and safe).
For each: write time (total and per flush), files and bytes on disk, the time to load the whole
Dataset with xarray, and what a reader meets when one chunk file is deleted. Needs `pip install
icechunk` (not a dependency of seqphase).
"""

import argparse
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

SWEEP = "glm-perceptron-se"


def points_of(source):
    from seqphase.results.store import Store

    src = Store(source).open_sweep(SWEEP)
    n = len(src.coords["alpha"])
    return {name: src.read(name).reshape((n,) + src.arrays[name].shape[len(src.dims):]) for name in src.variables}


def size_of(path):
    files = [p for p in Path(path).rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def write_all(group, plan, data, batch, commit=None, reopen=None):
    """The driver's writer on `group`: mark pending, then BATCH points per flush. Returns flush times."""
    meta = {"runtime_s": 0.01, "host": "bench", "worker": "tcp://bench", "slurm_job_id": ""}
    writer = group.writer()
    if reopen:
        reopen()
    writer.mark_pending([(group.index_of(p), p.hash) for p in plan.points])
    if commit:
        commit("pending")
    times = []
    for start in range(0, len(plan.points), batch):
        began = time.perf_counter()
        if reopen:
            reopen()
        for i in range(start, min(start + batch, len(plan.points))):
            point = plan.points[i]
            writer.done(group.index_of(point), point.hash, {k: v[i] for k, v in data.items()}, meta)
        writer.flush()
        if commit:
            commit(f"flush {start}")
        times.append(time.perf_counter() - began)
    return times


def own(folder, plan, data, batch, fsync):
    from seqphase.results import durable
    from seqphase.results.store import Store

    durable.FSYNC = fsync
    store = Store(folder / f"own-fsync{int(fsync)}.zarr")
    group = store.prepare(plan)
    times = write_all(group, plan, data, batch)
    store.consolidate()
    durable.FSYNC = True
    return store.path, times


class IcechunkGroup:
    """What BatchWriter needs of a group, over an Icechunk session (a new writable session per flush)."""

    def __init__(self, template, repo):
        self.template, self.repo = template, repo
        self.dims, self.variables = template.dims, template.variables
        self.index_of = template.index_of
        self.session = None
        self.arrays = {}

    def reopen(self):
        import zarr

        self.session = self.repo.writable_session("main")
        group = zarr.open_group(self.session.store, path=SWEEP, mode="r+", zarr_format=3)
        self.arrays = {name: group[name].with_config({"write_empty_chunks": True}) for name in self.template.arrays}

    def commit(self, message):
        self.session.commit(message)

    def read(self, name):
        return self.arrays[name][...]

    def read_block(self, name, selection):
        return np.array(self.arrays[name][selection])

    def save_manifest(self):
        pass  # Icechunk keeps its own manifest, written by the commit

    def writer(self):
        from seqphase.results.writer import BatchWriter

        return BatchWriter(self)


def icechunk_write(folder, plan, data, batch):
    import icechunk
    import zarr

    from seqphase.results.store import Store

    template = Store(folder / "template.zarr").prepare(plan)  # the arrays, chunks and codecs to copy
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(folder / "icechunk")))
    session = repo.writable_session("main")
    root = zarr.open_group(session.store, mode="a", zarr_format=3)
    group = root.create_group(SWEEP, attributes=template.group.attrs.asdict())
    for name, arr in template.group.arrays():
        new = group.create_array(name, shape=arr.shape, dtype=arr.dtype, chunks=arr.chunks,
                                 compressors=arr.compressors, fill_value=arr.fill_value,
                                 dimension_names=arr.metadata.dimension_names, attributes=arr.attrs.asdict())
        if name in template.dims or name not in template.arrays:
            new[...] = arr[...]
    session.commit("template")
    adapter = IcechunkGroup(template, repo)
    times = write_all(adapter, plan, data, batch, commit=adapter.commit, reopen=adapter.reopen)
    return repo, folder / "icechunk", times


def load_time(opener):
    began = time.perf_counter()
    ds = opener().load()
    return time.perf_counter() - began, ds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--keep", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import xarray as xr

    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    folder = Path(args.keep or tempfile.mkdtemp(prefix="seqphase-manifest-"))
    folder.mkdir(parents=True, exist_ok=True)
    data = points_of(args.source)
    plan = plan_sweep(load_sweep(SWEEP, overrides=[f"alpha=0.1:5:{len(data['overlap'])}"]))
    print(f"# {len(plan.points)} points, {args.batch} per flush, load {os.getloadavg()[0]:.2f}")
    print("| store | write s | per flush ms (mean / max) | files | MB | xarray load s | one chunk file deleted |")
    print("|---|---|---|---|---|---|---|")
    rows = {}
    for fsync in (True, False):
        path, times = own(folder, plan, data, args.batch, fsync)
        seconds, ds = load_time(lambda: xr.open_zarr(str(path), group=SWEEP))
        rows[f"own{int(fsync)}"] = ds
        victim = next((path / SWEEP / "mse" / "c").rglob("*"))
        while victim.is_dir():
            victim = next(victim.iterdir())
        victim.unlink()
        from seqphase.results.store import Store
        from seqphase.results.verify import damage_summary, find_damage

        found = damage_summary(find_damage(Store(path).open_sweep(SWEEP), missing_only=True)) or "not found"
        files, size = size_of(path)
        print(f"| seqphase, manifest, {'fsync' if fsync else 'no fsync'} | {sum(times):.2f} | "
              f"{1e3 * np.mean(times):.0f} / {1e3 * max(times):.0f} | {files} | {size / 1e6:.1f} | {seconds:.2f} | "
              f"{found} |", flush=True)
    repo, path, times = icechunk_write(folder, plan, data, args.batch)
    seconds, ds = load_time(lambda: xr.open_zarr(repo.readonly_session("main").store, group=SWEEP,
                                                 consolidated=False))
    same = all(ds[v].values.tobytes() == rows["own1"][v].values.tobytes() for v in ds.attrs.get("variables", []))
    files, size = size_of(path)
    chunks = sorted((path / "chunks").glob("*"), key=lambda p: p.stat().st_mtime) if (path / "chunks").is_dir() else []
    if chunks:
        chunks[-1].unlink()  # the newest: the last commit refers to it (older ones may be unreferenced copies)
        try:
            xr.open_zarr(repo.readonly_session("main").store, group=SWEEP, consolidated=False).load()
            found = "read as fill, no error"
        except Exception as exc:  # noqa: BLE001 -- what a reader meets
            found = f"{type(exc).__name__} on read"
    else:
        found = "no chunk files (all inlined in manifests)"
    print(f"| Icechunk {__import__('icechunk').__version__}, commit per flush | {sum(times):.2f} | "
          f"{1e3 * np.mean(times):.0f} / {1e3 * max(times):.0f} | {files} | {size / 1e6:.1f} | {seconds:.2f} | "
          f"{found} |")
    print(f"\nIcechunk values bit-identical to seqphase's: {same}")
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
