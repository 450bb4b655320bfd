"""Faults of HPC file systems (issue 24): chunks that are gone, a full file system, readers during a
run, closed pipes. The lock without flock is in test_store_lock.py."""

import errno
import io
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

from spec_files import write_spec
from test_store import tree_digest
from test_store_damage import same_bits, values
from seqphase.cli import main
from seqphase.cluster import driver, run_sweep
from seqphase.core.errors import StoreError
from seqphase.results import store as store_module
from seqphase.results.store import DONE, PENDING, Store
from seqphase.sweeps.planner import plan_sweep
from seqphase.sweeps.spec import load_sweep

ALPHA = "0.1:1.2:12"


@pytest.fixture(scope="module")
def reference(tmp_path_factory, client):
    """The 12-point toy sweep, 4 points per chunk (3 chunks per array), computed once."""
    folder = tmp_path_factory.mktemp("faults")
    spec = write_spec(folder, alpha=ALPHA)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store_module, "CHUNK_POINTS", 4)
        plan = plan_sweep(load_sweep(str(spec)))
        group = Store(folder / "ref.zarr").prepare(plan)
        run_sweep(plan, group, client, progress=False)
    return spec, folder / "ref.zarr"


def copy_of(reference, tmp_path):
    spec, ref = reference
    store = tmp_path / "s.zarr"
    shutil.copytree(ref, store)
    return spec, store


def rerun(spec, store, client):
    plan = plan_sweep(load_sweep(str(spec)))
    group = Store(store).prepare(plan)
    return run_sweep(plan, group, client, progress=False), group


def chunk(store, array, *index):
    return store / "toy" / array / "c" / "/".join(map(str, index))


DAMAGE = {  # what is done to the store -> points it holds
    "data chunk deleted": (lambda s: chunk(s, "overlap", 1, 0, 0, 0, 0, 0).unlink(), 4),
    "status chunk deleted": (lambda s: chunk(s, "status", 2, 0, 0, 0).unlink(), 4),
    "array folder deleted": (lambda s: shutil.rmtree(s / "toy" / "gen_error"), 12),
    "chunk truncated to 0 bytes": (lambda s: chunk(s, "noise", 0, 0, 0, 0, 0).write_bytes(b""), 4),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_chunk_gone_is_damage_listed_counted_and_recomputed(reference, tmp_path, client, capsys, kind):
    spec, store = copy_of(reference, tmp_path)
    damage, points = DAMAGE[kind]
    damage(store)
    untouched = tree_digest(store)

    assert main(["verify", "toy", "--store", str(store)]) == 1
    out = capsys.readouterr().out
    assert f"{points} points affected" in out and out.count("  point {") == points, out
    assert main(["status", "toy", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert f"{12 - points} done, 0 failed, 0 pending, {points} damaged (of 12 requested)" in out, out
    assert main(["query", "toy", "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "damaged data" in err[0], err
    with pytest.raises(StoreError, match="damaged data"):
        from seqphase.results.query import open_results

        open_results("toy", store=store)
    assert tree_digest(store) == untouched  # none of the readers wrote anything

    again, group = rerun(spec, store, client)
    assert (again.submitted, again.done, again.already_done) == (points, points, 12 - points)
    assert same_bits(values(reference[1]), values(store)) and (group.ledger()[0] == DONE).all()
    assert main(["verify", "toy", "--store", str(store)]) == 0
    assert "none damaged" in capsys.readouterr().out


def test_never_written_is_fill_and_a_lost_coordinate_is_refused(reference, tmp_path, capsys):
    spec, store = copy_of(reference, tmp_path)
    # A group prepared but never run: every data chunk is unwritten, and that is not damage.
    fresh = Store(tmp_path / "fresh.zarr")
    fresh.prepare(plan_sweep(load_sweep(str(spec))))
    assert main(["verify", "toy", "--store", str(fresh.path)]) == 0
    out = capsys.readouterr().out
    assert "none damaged; " in out and "chunks never written (fill values)" in out, out
    # A coordinate chunk that is gone: the grid is unknown; one line, and nothing is rolled back.
    (store / "toy" / "alpha" / "c" / "0").unlink()
    digest = tree_digest(store)
    for args in (["status", "toy"], ["verify", "toy"], ["run", str(spec), "--workers", "1"]):
        assert main(args + ["--store", str(store)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "damaged coordinate data" in err[0] and "toy/alpha" in err[0], err
    assert tree_digest(store) == digest


def test_store_without_manifest_starts_one(reference, tmp_path, client, capsys):
    spec, store = copy_of(reference, tmp_path)
    (store / ".seqphase" / "manifests" / "toy.json").unlink()  # as written before manifests
    chunk(store, "overlap", 1, 0, 0, 0, 0, 0).unlink()  # gone before any manifest: cannot be known
    assert main(["status", "toy", "--store", str(store)]) == 0
    assert "no chunk manifest" in capsys.readouterr().out
    again, _ = rerun(spec, store, client)
    assert again.submitted == 0  # read as fill, as before: the note above is what says so
    assert main(["status", "toy", "--store", str(store)]) == 0
    assert "chunk manifest kept since" in capsys.readouterr().out
    chunk(store, "noise", 2, 0, 0, 0, 0).unlink()  # gone after: damage
    assert main(["verify", "toy", "--store", str(store)]) == 1


# -- a full file system ---------------------------------------------------------------------------------
@pytest.fixture
def tmpfs(tmp_path):
    """A real 1 MiB tmpfs (needs root, as CI runs; skipped elsewhere with the reason)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(folder):
    """Fill the file system of `folder` up to the last byte; returns the ballast file."""
    ballast = folder / "ballast"
    with open(ballast, "wb") as handle:
        block = b"\0" * 4096
        try:
            while True:
                handle.write(block)
                handle.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return ballast


def test_full_file_system_one_line_pending_kept_and_rerun_identical(reference, tmpfs, client, monkeypatch, capsys):
    spec, ref = reference
    store = tmpfs / "s.zarr"
    address = client.scheduler.address
    monkeypatch.setattr(store_module, "CHUNK_POINTS", 4)
    monkeypatch.setattr(driver, "MAX_BATCH", 2)
    from seqphase.results.writer import BatchWriter

    monkeypatch.setattr(BatchWriter, "due", lambda self, interval_s: bool(self._entries))  # flush every task

    real_flush, flushes = BatchWriter.flush, []

    def flush_then_full(self):
        if self._entries:
            flushes.append(len(self._entries))
            if len(flushes) == 3:
                fill(tmpfs)  # the disk fills up while the sweep runs
        return real_flush(self)

    monkeypatch.setattr(BatchWriter, "flush", flush_then_full)
    assert main(["run", str(spec), "--store", str(store), "--cluster", address, "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    line = err[-1]
    assert "Traceback" not in "\n".join(err) and line.startswith(f"seqphase: error: {store}: no space left"), err
    assert "points not yet written are pending" in line and "fix: free space" in line
    assert main(["status", "toy", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    stored = values(store)
    done = stored["status"].ravel() == DONE
    assert 0 < done.sum() < 12 and (stored["status"].ravel()[~done] == PENDING).all()
    assert f"{done.sum()} done, 0 failed, {12 - done.sum()} pending (of 12 requested)" in out, out
    reference_values = values(ref)
    for name in ("overlap", "gen_error", "noise"):  # what is marked done is whole and right
        assert stored[name][done].tobytes() == reference_values[name][done].tobytes()
    assert main(["verify", "toy", "--store", str(store)]) == 0
    capsys.readouterr()
    # Still full: nothing can run; exit 2, one line, the store untouched.
    digest = tree_digest(store)
    monkeypatch.setattr(BatchWriter, "flush", real_flush)
    assert main(["run", str(spec), "--store", str(store), "--cluster", address, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no space left" in err[0] and "pending" not in err[0], err
    assert tree_digest(store) == digest
    # Space freed: the rerun computes the rest, to the same bits as on a roomy disk.
    (tmpfs / "ballast").unlink()
    assert main(["run", str(spec), "--store", str(store), "--cluster", address, "--no-progress"]) == 0
    assert same_bits(reference_values, values(store)) and (values(store)["status"] == DONE).all()
    capsys.readouterr()
    # Read-only: one line naming the store, exit 2.
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    assert main(["run", str(spec), "--store", str(store), "--cluster", address, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "read-only" in err[0] and str(store) in err[0], err


@pytest.mark.parametrize("code, words", [(errno.EDQUOT, "quota"), (errno.EACCES, "permission denied"),
                                         (errno.EMFILE, "ulimit -n")])
def test_other_resource_errors_are_one_line(tmp_path, monkeypatch, capsys, code, words):
    store = tmp_path / "s.zarr"

    def refuse(self, create=False, allow_missing=False):
        raise OSError(code, os.strerror(code), str(store / "zarr.json"))

    monkeypatch.setattr(Store, "check", refuse)
    assert main(["status", "toy", "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and str(store) in err[0], err


# -- readers during a run, closed pipes --------------------------------------------------------------------
@pytest.mark.parametrize("reader", ["query", "open_results"])
def test_a_write_between_reads_leaves_whole_points(reference, tmp_path, monkeypatch, reader):
    """A reader that meets a driver's flush between two of its chunk reads: whatever it reads first, the
    rows it calls done are whole (the driver's flush is made to happen right after the reader's first
    chunk read of a per-point array, deterministically)."""
    import asyncio

    from seqphase.results.query import open_results, write_table

    spec, ref = reference
    monkeypatch.setattr(store_module, "CHUNK_POINTS", 4)
    plan = plan_sweep(load_sweep(str(spec)))
    group = Store(tmp_path / "s.zarr").prepare(plan)
    source = {name: v.reshape((12,) + v.shape[4:]) for name, v in values(ref).items()}  # per point
    meta = {"runtime_s": 0.5, "host": "h", "worker": "w", "slurm_job_id": ""}

    def store_points(cells):
        writer = group.writer()
        for i in cells:
            data = {"overlap": source["overlap"][i], "gen_error": source["gen_error"][i], "noise": source["noise"][i]}
            writer.done(group.index_of(plan.points[i]), plan.points[i].hash, data, meta)
        writer.flush()

    group.writer().mark_pending([(group.index_of(p), p.hash) for p in plan.points])
    store_points(range(4))
    from seqphase.results.durable import DurableStore

    real_get, flushed = DurableStore.get, []  # (every read of the store goes through it: results/safe_io.py)

    async def get(self, key, *args, **kwargs):
        value = await real_get(self, key, *args, **kwargs)
        array = key.split("/")[1] if key.count("/") > 2 else ""
        if not flushed and "/c/" in key and array not in ("alpha", "fail", "sleep", "copies", "row", "col", "seed"):
            flushed.append(array)
            await asyncio.to_thread(store_points, range(4, 12))  # the driver's next flush, between two reads
        return value

    monkeypatch.setattr(DurableStore, "get", get)
    if reader == "query":
        out = io.StringIO()
        write_table("toy", tmp_path / "s.zarr", out)
        rows = [dict(zip(out.getvalue().splitlines()[0].split(","), line.split(",")))
                for line in out.getvalue().splitlines()[1:]]
        assert rows and flushed
        for row in rows:
            assert float(row["overlap_1_1"]) == float(row["alpha"]) / (1 + float(row["alpha"]))
            assert row["attempts"] == "1" and float(row["runtime_s"]) == 0.5 and row["host"] == "h"
    else:
        ds = open_results("toy", store=tmp_path / "s.zarr")
        done = ds["status"].values == DONE
        assert done.any() and flushed
        for name in ("overlap", "gen_error", "noise", "runtime_s"):
            assert np.isfinite(ds[name].values[done]).all(), name
        assert (ds["attempts"].values[done] == 1).all() and (ds["host"].values[done] == "h").all()


@pytest.mark.slow
def test_concurrent_reader_sees_only_whole_points(tmp_path, client, monkeypatch):
    from seqphase.results.query import open_results, write_table

    from seqphase.results.writer import BatchWriter

    monkeypatch.setattr(BatchWriter, "due", lambda self, interval_s: bool(self._entries))  # flush every task
    monkeypatch.setattr(driver, "MAX_BATCH", 8)
    monkeypatch.setattr(store_module, "CHUNK_POINTS", 16)
    plan = plan_sweep(load_sweep(str(write_spec(tmp_path, alpha="0.1:5:48", extra_params="sleep = 0.01"))))
    group = Store(tmp_path / "s.zarr").prepare(plan)
    open_results("toy", store=tmp_path / "s.zarr")  # imports done before the run starts
    worker = threading.Thread(target=run_sweep, args=(plan, group, client), kwargs={"progress": False})
    worker.start()
    seen_partial = 0
    try:
        while worker.is_alive():
            out = io.StringIO()
            write_table("toy", tmp_path / "s.zarr", out)
            rows = [line.split(",") for line in out.getvalue().splitlines()]
            if len(rows) > 1:
                head = rows[0]
                alpha, overlap, noise = (np.array([float(r[head.index(c)]) for r in rows[1:]])
                                         for c in ("alpha", "overlap_1_1", "noise"))
                assert np.array_equal(overlap, alpha / (1 + alpha)) and np.isfinite(noise).all()
            ds = open_results("toy", store=tmp_path / "s.zarr")
            done = ds["status"].values == DONE
            assert np.isfinite(ds["overlap"].values[done]).all() and np.isfinite(ds["noise"].values[done]).all()
            seen_partial += bool(0 < done.sum() < 48)
    finally:
        worker.join()
    assert seen_partial, "no read happened while the run was half done"


@pytest.mark.parametrize("args", [["list"], ["query", "toy"]])
def test_closed_pipe_ends_quietly(reference, args):
    _, store = reference
    command = [sys.executable, "-m", "seqphase.cli", *args] + (["--store", str(store)] if args != ["list"] else [])
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line (as `| head -0`)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and err == "", err


def test_chunks_and_directories_reach_the_disk_before_done(reference, tmp_path, monkeypatch):
    """The rule of durable "done": every chunk of a batch is fsync'ed before it is renamed into place,
    its directory is fsync'ed after, and both happen before the `status` chunk that marks the batch
    done is renamed into place; the manifest is saved in between."""
    spec, ref = reference
    monkeypatch.setattr(store_module, "CHUNK_POINTS", 4)
    plan = plan_sweep(load_sweep(str(spec)))
    group = Store(tmp_path / "s.zarr").prepare(plan)
    group.writer().mark_pending([(group.index_of(p), p.hash) for p in plan.points])
    source = {name: v.reshape((12,) + v.shape[4:]) for name, v in values(ref).items()}
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(dst)))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    writer = group.writer()
    for i in range(4, 8):
        data = {name: source[name][i] for name in ("overlap", "gen_error", "noise")}
        writer.done(group.index_of(plan.points[i]), plan.points[i].hash, data, {"runtime_s": 1.0})
    writer.flush()
    status_at = next(k for k, (what, path) in enumerate(events) if what == "replace" and "/status/c/" in path)
    before = events[:status_at]
    chunks = [path for what, path in before if what == "replace" and "/c/" in path]
    assert {p.split("/toy/")[1].split("/")[0] for p in chunks} >= {"overlap", "gen_error", "noise", "runtime_s"}
    for path in chunks:
        at = before.index(("replace", path))
        assert any(w == "fsync" and p.startswith(path + ".") for w, p in before[:at]), path  # the file
        assert ("fsync", os.path.dirname(path)) in before[at:], path  # its directory entry
    manifest = str(tmp_path / "s.zarr" / ".seqphase" / "manifests" / "toy.json")
    assert ("replace", manifest) in before  # listed before done
    assert ("replace", manifest) in events[status_at:]  # and the status chunk listed after
