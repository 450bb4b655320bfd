"""The Python API's own contract: what `seqphase.run` returns."""

import seqphase
from spec_files import write_spec


def test_run_returns_the_points_it_asked_for(tmp_path, client):
    """`run(set=...)` returns the grid of that call, in the stored order; `open_results` opens every point the
    store holds of the sweep."""
    spec = write_spec(tmp_path, alpha=[0.5, 1.0, 2.0])
    store = tmp_path / "s.zarr"
    whole = seqphase.run(spec, store=store, client=client, progress=False)
    assert list(whole["alpha"].values) == [0.5, 1.0, 2.0]
    ds = seqphase.run(spec, set={"alpha": "3,1"}, store=store, client=client, progress=False)
    assert list(ds["alpha"].values) == [1.0, 3.0]
    assert (ds["status"].values == 2).all()
    assert float(ds["overlap"].sel(alpha=3.0).squeeze()) == 0.75
    ds = seqphase.run(spec, set={"alpha": "0.5:2:4"}, store=store, client=client, progress=False)
    assert list(ds["alpha"].values) == [0.5, 1.0, 1.5, 2.0]
    assert list(seqphase.open_results("toy", store=store)["alpha"].values) == [0.5, 1.0, 1.5, 2.0, 3.0]
