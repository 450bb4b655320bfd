"""One name per quantity, CF attributes, CF times, and the default store (results/conventions.py).

An old BSR store (the error stored as `mmse`, `finished_at` as plain seconds) is made from a new one by
undoing the conventions on disk, then read through open_results / query, refused by run, and migrated bit
for bit."""

import csv
import io
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from seqphase.cli import main
from seqphase.results.conventions import iso8601, long_name, to_datetime64
from seqphase.results.query import open_results
from seqphase.results.store import Store

ARGS = ["--set", "alpha=0.25,0.5", "--set", "rho=0.5", "--set", "beta=1", "--set", "delta=0", "--no-progress"]


@pytest.fixture(scope="module")
def bsr_store(tmp_path_factory, client):
    folder = tmp_path_factory.mktemp("conventions")
    store = folder / "s.zarr"
    assert main(["run", "bsr-se", "--store", str(store), "--cluster", client.scheduler.address] + ARGS) == 0
    return store


def test_every_variable_has_long_name_and_units(bsr_store):
    ds = open_results("bsr-se", bsr_store)
    for name, var in ds.variables.items():
        assert var.attrs.get("long_name"), name
        if var.dtype.kind in "fiub":
            assert var.attrs.get("units") or var.encoding.get("units"), name
    assert ds["runtime_s"].attrs["units"] == "s" and ds["mse"].attrs["units"] == "1"
    assert ds["finished_at"].dtype == np.dtype("datetime64[ns]")
    assert ds["finished_at"].encoding["units"].startswith("seconds since 1970-01-01")
    assert "mmse" not in ds and float(ds["mse"].sel(alpha=0.5).item()) == pytest.approx(0.3514552, abs=2e-7)


def test_query_prints_iso_8601(bsr_store, capsys):
    assert main(["query", "bsr-se", "--store", str(bsr_store)]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 2 and all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["finished_at"]) for r in rows)
    assert "mse" in rows[0] and "mmse" not in rows[0]


def _age(store, name="bsr-se"):
    """Undo the conventions on disk: the error back to `mmse`, finished_at without its CF units."""
    folder = store / name
    os.rename(folder / "mse", folder / "mmse")
    meta = json.loads((folder / "zarr.json").read_text())
    meta["attributes"]["variables"] = ["mmse" if v == "mse" else v for v in meta["attributes"]["variables"]]
    (folder / "zarr.json").write_text(json.dumps(meta))
    meta = json.loads((folder / "finished_at" / "zarr.json").read_text())
    for key in ("units", "calendar", "standard_name", "long_name"):
        meta["attributes"].pop(key, None)
    (folder / "finished_at" / "zarr.json").write_text(json.dumps(meta))
    Store(store).unconsolidate(name)


def test_old_bsr_store_reads_refuses_run_and_migrates_bit_for_bit(bsr_store, tmp_path, capsys):
    store = tmp_path / "old.zarr"
    shutil.copytree(bsr_store, store)
    new_bits = Store(bsr_store).open_sweep("bsr-se").read("mse").tobytes()
    _age(store)
    assert Store(store).open_sweep("bsr-se").variables[0] == "mmse"
    ds = open_results("bsr-se", store)  # read under the current names, times decoded
    assert "mse" in ds and ds["finished_at"].dtype.kind == "M"
    assert main(["query", "bsr-se", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split(",")[4] == "mse" and re.search(r",\d{4}-\d\d-\d\dT[\d:]+Z,", out)
    tree = sorted(p.name for p in (store / "bsr-se").iterdir())
    assert main(["run", "bsr-se", "--store", str(store), "--workers", "1"] + ARGS) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "mmse" in err and "seqphase migrate" in err
    assert sorted(p.name for p in (store / "bsr-se").iterdir()) == tree  # nothing written
    assert main(["migrate", "bsr-se", "--store", str(store)]) == 0
    assert "mmse -> mse" in capsys.readouterr().err
    group = Store(store).open_sweep("bsr-se")
    assert "mse" in group.variables and "mmse" not in group.variables
    assert group.read("mse").tobytes() == new_bits


def test_default_store_is_the_working_folder_or_the_environment(monkeypatch, tmp_path):
    from seqphase.results.schema import default_store

    monkeypatch.delenv("SEQPHASE_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    assert Store().path == Path("seqphase.zarr") and default_store() == "seqphase.zarr"
    monkeypatch.setenv("SEQPHASE_STORE", str(tmp_path / "elsewhere.zarr"))
    assert Store().path == tmp_path / "elsewhere.zarr"


def test_times_and_long_names():
    seconds = np.array([0.0, np.nan, 1.7e9 + 0.25])
    times = to_datetime64(seconds)
    assert np.isnat(times[1]) and str(times[0]) == "1970-01-01T00:00:00.000000000"
    assert list(iso8601(seconds)) == ["1970-01-01T00:00:00Z", "", "2023-11-14T22:13:20Z"]
    assert list(iso8601(times)) == list(iso8601(seconds))
    assert long_name("closed-form perfect-recovery threshold of (rho, beta) (NaN if delta > 0)") == \
        "closed-form perfect-recovery threshold"
