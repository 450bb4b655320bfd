"""Damage is noticed and repaired, layout-1 stores migrate bit for bit, metadata is consolidated, and
cheap points are batched without changing a single stored value."""

import os
import shutil
import warnings

import numpy as np
import pytest
import xarray as xr

from spec_files import write_spec
from cli_run import cli_here, on_cluster
from test_store import tree_digest
from seqphase.cli import main
from seqphase.cluster import driver, run_sweep
from seqphase.core.errors import StoreError
from seqphase.results import store as store_module
from seqphase.results.store import DONE, PENDING, Store
from seqphase.sweeps.planner import plan_sweep
from seqphase.sweeps.spec import load_sweep

VALUES = ["overlap", "gen_error", "noise"]


def run(tmp_path, client, store="s.zarr", **spec):
    plan = plan_sweep(load_sweep(str(write_spec(tmp_path, **spec))))
    group = Store(tmp_path / store).prepare(plan)
    return run_sweep(plan, group, client, progress=False), group


def values(path, group="toy"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = xr.open_zarr(str(path), group=group, consolidated=False).load()
    return {name: ds[name].values.copy() for name in VALUES + ["status", "attempts"]}


def same_bits(a, b):
    return all(a[n].tobytes() == b[n].tobytes() for n in VALUES)


@pytest.fixture
def small_chunks(monkeypatch):
    """4 points per chunk, so that a 12-point sweep has 3 chunks per array."""
    monkeypatch.setattr(store_module, "CHUNK_POINTS", 4)


def test_damaged_chunk_is_detected_and_only_its_points_recomputed(tmp_path, client, small_chunks, capsys):
    summary, group = run(tmp_path, client, alpha="0.1:1.2:12")
    assert summary.done == 12
    before = values(group.store.path)
    assert group.arrays["overlap"].chunks[0] == 4
    chunk = group.folder / "overlap" / "c" / "1" / "0" / "0" / "0" / "0" / "0"
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the chunk of points 4..7
    chunk.write_bytes(bytes(data))
    untouched = tree_digest(group.store.path)

    # verify: every chunk decoded, the 4 points listed, exit 1; query refuses in one line; status says so.
    assert main(["verify", "toy", "--store", str(group.store.path)]) == 1
    out = capsys.readouterr().out
    assert "1 of" in out and "4 points affected" in out and out.count("  point {") == 4
    assert "overlap/c/1/0/0/0/0/0" in out
    assert main(["query", "toy", "--store", str(group.store.path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "damaged data" in err[0] and "seqphase run toy" in err[0]
    assert main(["status", "toy", "--store", str(group.store.path)]) == 0
    assert "damaged: 1 chunks fail their checksum, 4 points affected" in capsys.readouterr().out
    assert tree_digest(group.store.path) == untouched  # none of these wrote anything

    # run: exactly the 4 damaged points are recomputed, to the same bits.
    again, group = run(tmp_path, client, alpha="0.1:1.2:12")
    assert (again.submitted, again.done, again.already_done) == (4, 4, 8)
    after = values(group.store.path)
    assert same_bits(before, after) and (after["status"] == DONE).all()
    assert after["attempts"].ravel().tolist() == [1] * 4 + [2] * 4 + [1] * 4
    assert main(["verify", "toy", "--store", str(group.store.path)]) == 0


def test_damaged_ledger_chunk_sets_its_points_pending(tmp_path, client, small_chunks):
    _, group = run(tmp_path, client, alpha="0.1:1.2:12")
    before = values(group.store.path)
    (group.folder / "status" / "c" / "2" / "0" / "0" / "0").write_bytes(os.urandom(40))
    reopened = Store(group.store.path).open_sweep("toy")
    assert reopened.ledger()[0].ravel().tolist() == [DONE] * 8 + [0] * 4  # unreadable chunk reads as fill
    plan = plan_sweep(load_sweep(str(tmp_path / "toy.toml")))
    prepared = Store(group.store.path).prepare(plan)
    assert prepared.damaged_cells == 4 and prepared.ledger()[0].ravel().tolist() == [DONE] * 8 + [PENDING] * 4
    again = run_sweep(plan, prepared, client, progress=False)
    assert (again.submitted, again.done) == (4, 4)
    assert same_bits(before, values(group.store.path))


def test_corrupted_array_metadata_one_line_exit_2_untouched(tmp_path, client):
    spec = write_spec(tmp_path, alpha=[0.5, 1.0])
    store = tmp_path / "s.zarr"
    code, _, err = cli_here("run", spec, "--store", store, *on_cluster(client), "--no-progress")
    assert code == 0, err
    before = values(store)
    meta = store / "toy" / "overlap" / "zarr.json"
    meta.write_text('{"zarr_format": 3, "node_type": "array", "shape": [')
    digest = tree_digest(store)
    for args in (["status", "toy"], ["query", "toy"], ["verify", "toy"], ["run", spec, "--workers", "1"]):
        code, out, err = cli_here(*args, "--store", store)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, (args, err)
        assert str(meta) in lines[0] and "corrupted metadata" in lines[0] and "fix: restore" in lines[0]
        assert "Traceback" not in err
    assert tree_digest(store) == digest
    # The fix the line gives: move the group aside and rerun: the same values, bit for bit.
    shutil.move(str(store / "toy"), str(tmp_path / "toy.broken"))
    code, _, err = cli_here("run", spec, "--store", store, *on_cluster(client), "--no-progress")
    assert code == 0, err
    assert same_bits(before, values(store))


def test_lock_is_checked_before_any_cluster_starts(tmp_path, monkeypatch, capsys):
    import seqphase.cluster

    spec = write_spec(tmp_path)
    store = Store(tmp_path / "s.zarr")
    store.check(create=True)

    def no_cluster(*args, **kwargs):
        raise AssertionError("a cluster was started although the store is locked")

    monkeypatch.setattr(seqphase.cluster, "connect", no_cluster)
    with store.lock():
        assert main(["run", str(spec), "--store", str(store.path), "--workers", "1"]) == 2
    assert "another seqphase driver is writing this store" in capsys.readouterr().err


def test_metadata_consolidated_after_a_run(tmp_path, client):
    _, group = run(tmp_path, client)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = xr.open_zarr(str(group.store.path), group="toy")
        b = xr.open_zarr(str(group.folder))
    assert a["overlap"].shape == b["overlap"].shape == group.arrays["overlap"].shape
    assert a.attrs["runs"][-1]["outcome"] == "finished"
    # A later run drops it first (no stale shapes while the grid grows) and writes it again at the end.
    run(tmp_path, client, alpha=[0.5, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        grown = xr.open_zarr(str(group.store.path), group="toy")
    assert grown.sizes["alpha"] == 5 and len(grown.attrs["runs"]) == 2


def make_layout1(monkeypatch):
    """The store as seqphase wrote it before layout 2: a chunk per point, zstd without checksum."""
    from zarr.codecs import ZstdCodec

    monkeypatch.setattr(store_module, "grid_chunks", lambda shape, point_bytes: (1,) * len(shape))
    monkeypatch.setattr(store_module, "codecs", lambda: (ZstdCodec(),))
    monkeypatch.setattr(store_module, "LAYOUT", 1)


def test_layout1_store_migrates_bit_for_bit(tmp_path, client, monkeypatch, capsys):
    with monkeypatch.context() as patch:
        make_layout1(patch)
        _, group = run(tmp_path, client, alpha="0.1:1.2:12")
    assert group.layout == 1 and group.arrays["overlap"].chunks[0] == 1
    store = group.store.path
    before = values(store)
    files_before = sum(1 for p in (store / "toy").rglob("*") if p.is_file())
    # One damaged legacy chunk (no checksum: zstd cannot decode it): verify finds it by decoding.
    (store / "toy" / "noise" / "c" / "3" / "0" / "0" / "0" / "0").write_bytes(os.urandom(30))
    assert main(["verify", "toy", "--store", str(store)]) == 1
    assert "1 points affected" in capsys.readouterr().out
    assert main(["migrate", "--store", str(store)]) == 0
    assert "1 points with damaged data set pending" in capsys.readouterr().err
    group = Store(store).open_sweep("toy")
    assert group.layout == 2 and group.arrays["overlap"].chunks[0] == 12
    assert type(group.arrays["noise"].metadata.codecs[-1]).__name__ == "Crc32cCodec"
    assert sum(1 for p in (store / "toy").rglob("*") if p.is_file()) < files_before
    after = values(store)
    for name in VALUES:  # every value but the damaged point's noise is the same bits
        keep = np.ones(after[name].shape[:1], bool)
        if name == "noise":
            keep[3] = False
        assert after[name][keep].tobytes() == before[name][keep].tobytes()
    assert (after["status"].ravel() == DONE).sum() == 11
    again, _ = run(tmp_path, client, alpha="0.1:1.2:12")
    assert again.submitted == 1 and same_bits(before, values(store))
    assert main(["migrate", "toy", "--store", str(store)]) == 0
    assert "already in the current layout" in capsys.readouterr().err


def test_batched_points_store_the_same_bits_and_failures_alone(tmp_path, client, monkeypatch):
    submitted = []
    real_submit = type(client).submit

    def counting_submit(self, func, *args, **kwargs):
        submitted.append(func.__name__)
        return real_submit(self, func, *args, **kwargs)

    monkeypatch.setattr(type(client), "submit", counting_submit)
    spec = dict(alpha="0.1:2:40", extra_params='fail = ["never", "always"]')
    summary, group = run(tmp_path, client, store="batched.zarr", **spec)
    assert (summary.done, summary.failed) == (40, 40)
    assert "execute_batch" in submitted
    status = group.ledger()[0]
    errors = group.read("error")
    assert (status[:, 0] == DONE).all() and (status[:, 1] == 3).all()
    assert all(e.startswith("RuntimeError: injected failure at alpha=") for e in errors[:, 1].ravel())
    assert (group.read("attempts") == 1).all()
    for key in ("host", "worker"):
        assert (group.read(key)[:, 0] != "").all()
    assert np.isfinite(group.read("runtime_s")[:, 0]).all()  # per point, also inside batches
    # The same sweep with one point per task: the same bits.
    submitted.clear()
    monkeypatch.setattr(driver, "MAX_BATCH", 1)
    run(tmp_path, client, store="single.zarr", **spec)
    assert "execute_batch" not in submitted
    a, b = values(tmp_path / "batched.zarr"), values(tmp_path / "single.zarr")
    assert same_bits(a, b) and np.unique(a["noise"][:, 0]).size == a["noise"][:, 0].size


def test_streamed_query_is_the_whole_table(tmp_path, client, monkeypatch):
    import io
    import json

    from seqphase.results import query

    run(tmp_path, client, alpha="0.6:1.2:6", extra_params='fail = ["never", "always"]')
    # Grown: appended alpha values below the first ones (rows come sorted) and a second `fail` value.
    _, group = run(tmp_path, client, alpha="0.1:1.2:12", extra_params='fail = ["never", "always"]')
    assert group.coords["alpha"][0] == 0.6
    ds = query.open_results("toy", store=group.store.path)
    for include_all in (False, True):
        whole = query.to_frame(ds, include_all=include_all)
        expected = {"csv": whole.to_csv(index=False), "json": query.frame_to_json(whole, ds) + "\n"}
        for rows in (1_000_000, 5):  # one block; blocks of one grid value (3 rows each)
            monkeypatch.setattr(query, "BLOCK_ROWS", rows)
            for fmt in ("csv", "json"):
                out = io.StringIO()
                query.write_table("toy", group.store.path, out, fmt=fmt, include_all=include_all)
                assert out.getvalue() == expected[fmt], (fmt, rows, include_all)
    assert len(json.loads(expected["json"])["rows"]) == 16 * 2 * 3  # 12 + 4 alphas not in the first run


def test_unparseable_group_metadata_names_the_file(tmp_path):
    store = Store(tmp_path / "s.zarr")
    store.prepare(plan_sweep(load_sweep(str(write_spec(tmp_path)))))
    (store.path / "toy" / "status" / "zarr.json").write_text("\x00\x01garbage")
    with pytest.raises(StoreError) as info:
        store.open_sweep("toy")
    assert str(store.path / "toy" / "status" / "zarr.json") in info.value.one_line()
    # Valid JSON that zarr cannot use as array metadata is refused the same way.
    (store.path / "toy" / "status" / "zarr.json").write_text('{"zarr_format": 3, "node_type": "array"}')
    with pytest.raises(StoreError, match="corrupted array metadata"):
        store.open_sweep("toy")


def test_a_group_copied_in_from_another_store_opens(tmp_path, client):
    """A sweep's folder copied into another store that has consolidated metadata without it: open_results
    reads it at its own folder (through the root's metadata it raised a bare KeyError)."""
    from seqphase.results.query import open_results

    run(tmp_path, client, store="a.zarr")
    run(tmp_path, client, store="b.zarr", name="other", alpha="0.5:2:3")
    Store(tmp_path / "a.zarr").consolidate()  # the root lists "toy" only
    shutil.copytree(tmp_path / "b.zarr" / "other", tmp_path / "a.zarr" / "other")
    copied = open_results("other", tmp_path / "a.zarr")
    original = open_results("other", tmp_path / "b.zarr")
    assert copied["alpha"].size == 3 and all(copied[n].equals(original[n]) for n in VALUES)
