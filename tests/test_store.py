"""The store refuses what it did not write, keeps what it did, and grows without overwriting."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from spec_files import write_spec
from seqphase.core.errors import StoreError
from seqphase.results.store import DONE, PENDING, Store
from seqphase.sweeps.planner import plan_sweep
from seqphase.sweeps.spec import load_sweep


def tree_digest(path):
    """Digest of every file under a path: 'untouched' means this does not change."""
    digest = hashlib.sha256()
    for file in sorted(Path(path).rglob("*")):
        if file.is_file() and file.name != ".seqphase-driver.lock":
            digest.update(str(file.relative_to(path)).encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()


def test_foreign_zarr_store_is_refused_untouched(tmp_path):
    foreign = tmp_path / "foreign.zarr"
    root = zarr.open_group(str(foreign), mode="w", zarr_format=3)
    root.create_array("data", shape=(3,), dtype="f8")[:] = [1, 2, 3]
    before = tree_digest(foreign)
    with pytest.raises(StoreError, match="written by something else"):
        Store(foreign).check(create=True)
    assert tree_digest(foreign) == before


def test_non_store_directory_and_file_are_refused(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "thesis.tex").write_text("precious")
    with pytest.raises(StoreError, match="not a zarr store"):
        Store(folder).check(create=True)
    assert (folder / "thesis.tex").read_text() == "precious"
    file = tmp_path / "file.zarr"
    file.write_text("x")
    with pytest.raises(StoreError, match="not a zarr store directory"):
        Store(file).check(create=True)


def test_corrupted_metadata_is_refused_untouched(tmp_path):
    store = Store(tmp_path / "s.zarr")
    plan = plan_sweep(load_sweep(str(write_spec(tmp_path))))
    store.prepare(plan)
    (store.path / "toy" / "zarr.json").write_text("{ not json")
    before = tree_digest(store.path)
    with pytest.raises(StoreError, match="corrupted"):
        store.prepare(plan)
    with pytest.raises(StoreError, match="corrupted"):
        Store(store.path).open_sweep("toy")
    assert tree_digest(store.path) == before
    (store.path / "zarr.json").write_text("garbage")
    with pytest.raises(StoreError, match="corrupted store metadata"):
        Store(store.path).check()


def test_missing_array_is_reported(tmp_path):
    """An array folder that is gone is recreated from the manifest's copy of its metadata; without a
    manifest (a group written before manifests) it is one line naming the array."""
    store = Store(tmp_path / "s.zarr")
    plan = plan_sweep(load_sweep(str(write_spec(tmp_path))))
    store.prepare(plan)
    import shutil

    shutil.rmtree(store.path / "toy" / "status")
    assert store.open_sweep("toy").lost == {"status"}  # readable: no chunk was written, nothing is damaged
    assert store.prepare(plan).damaged_cells == 0 and (store.path / "toy" / "status" / "zarr.json").is_file()
    shutil.rmtree(store.path / "toy" / "status")
    (store.path / ".seqphase" / "manifests" / "toy.json").unlink()
    with pytest.raises(StoreError, match="'status' is missing"):
        store.open_sweep("toy")


def test_template_written_once_readable_by_plain_xarray(tmp_path):
    store = Store(tmp_path / "s.zarr")
    plan = plan_sweep(load_sweep(str(write_spec(tmp_path))))
    group = store.prepare(plan)
    ds = xr.open_zarr(str(store.path), group="toy", consolidated=False)
    assert ds["overlap"].dims == ("alpha", "fail", "sleep", "copies", "row", "col")
    # Layout 2: the whole 4-point grid in one chunk per array, each chunk checksummed.
    assert ds["overlap"].encoding["chunks"] == (4, 1, 1, 1, 1, 1)
    assert ds.attrs["store_layout"] == 2
    assert [type(c).__name__ for c in zarr.open_array(str(store.path / "toy" / "overlap")).metadata.codecs] == \
        ["BytesCodec", "ZstdCodec", "Crc32cCodec"]
    assert np.isnan(ds["overlap"].values).all() and (ds["status"].values == 0).all()
    assert ds.attrs["identity_hash"] == plan.identity_hash
    assert "seqphase_version" in ds.attrs["provenance"] and "zarr" in ds.attrs["provenance"]["versions"]
    # Data first, done flag last; a pending point stays pending until written.
    point = plan.points[1]
    index = group.index_of(point)
    group.mark_pending([(index, point.hash)])
    assert group.ledger()[0][index] == PENDING
    group.write_point(index, point.hash, {"overlap": np.ones((1, 1)), "gen_error": 0.0, "noise": np.zeros(3)},
                      {"runtime_s": 0.1, "host": "h", "worker": "w"})
    ds = xr.open_zarr(str(store.path), group="toy", consolidated=False)
    assert ds["status"].values.ravel().tolist() == [0, DONE, 0, 0]
    assert ds["overlap"].sel(alpha=1.0).values.ravel().tolist() == [1.0]


def test_grid_grows_without_overwriting(tmp_path):
    store = Store(tmp_path / "s.zarr")
    path = write_spec(tmp_path)
    plan = plan_sweep(load_sweep(str(path)))
    group = store.prepare(plan)
    for point in plan.points:
        group.write_point(group.index_of(point), point.hash,
                          {"overlap": np.full((1, 1), point.params["alpha"]), "gen_error": 0.0,
                           "noise": np.zeros(3)}, {})
    bigger = plan_sweep(load_sweep(str(path), overrides=["alpha=0.25,1.0,3.0", "fail=never,always"]))
    group = store.prepare(bigger)
    ds = xr.open_zarr(str(store.path), group="toy", consolidated=False)
    assert ds.sizes["alpha"] == 6 and ds.sizes["fail"] == 2
    old = ds.sel(fail="never", alpha=[0.5, 1.0, 1.5, 2.0])
    assert old["overlap"].values.ravel().tolist() == [0.5, 1.0, 1.5, 2.0]
    assert (old["status"].values == DONE).all()
    assert np.isnan(ds["overlap"].sel(alpha=3.0).values).all()


def test_interrupted_extension_is_rolled_back(tmp_path):
    store = Store(tmp_path / "s.zarr")
    group = store.prepare(plan_sweep(load_sweep(str(write_spec(tmp_path)))))
    # Simulate a driver killed after resizing the data arrays and the coordinate, before filling it.
    for name in ["overlap", "status", "alpha"]:
        arr = group.group[name]
        shape = list(arr.shape)
        shape[0] += 1
        arr.resize(tuple(shape))
    # a reader (status, query, verify, plot) changes nothing: it refuses the grid caught mid-extension
    before = tree_digest(store.path)
    with pytest.raises(StoreError, match="being extended"):
        Store(store.path).open_sweep("toy")
    assert tree_digest(store.path) == before
    # a writer (a run, holding the lock) rolls the extension back
    reopened = Store(store.path).open_sweep("toy", write=True)
    assert len(reopened.coords["alpha"]) == 4
    assert reopened.group["overlap"].shape[0] == 4
    xr.open_zarr(str(store.path), group="toy", consolidated=False)


def test_changed_settings_refused_with_fix(tmp_path):
    store = Store(tmp_path / "s.zarr")
    path = write_spec(tmp_path)
    store.prepare(plan_sweep(load_sweep(str(path))))
    before = tree_digest(store.path)
    with pytest.raises(StoreError) as info:
        store.prepare(plan_sweep(load_sweep(str(path), overrides=["scale=3"])))
    assert "method.scale" in info.value.one_line() and "--name" in info.value.one_line()
    assert tree_digest(store.path) == before


def test_second_driver_is_locked_out(tmp_path):
    store = Store(tmp_path / "s.zarr")
    store.check(create=True)
    with store.lock():
        with pytest.raises(StoreError, match="another seqphase driver"):
            with Store(store.path).lock():
                pass
    with store.lock():
        pass
