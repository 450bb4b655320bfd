"""The MultiIndexModel through the registry contract (run_point checks shapes against the layout)."""

import numpy as np
import pytest

from seqphase.core.errors import ParameterError
from seqphase.core.models import get_model, run_point

NAME = "seqphase.core.multiindex.model:MultiIndexModel"


def test_threshold_point_sign_z1z2():
    m = get_model(NAME)
    s = m.check_settings("threshold", {})
    out = run_point(NAME, "threshold", {"channel": "sign-z1z2", "p": 0}, s, 1, (0,))
    assert abs(out["alpha_stability"][0] - np.pi**2 / 4) < 1e-6
    assert out["relative_gap"][0] < 1e-2
    assert np.isnan(out["alpha_stability"][1])
    assert out["subspace_dim"][0] == 2


def test_se_point_runs():
    m = get_model(NAME)
    s = m.check_settings("se", {"max_iter": 30, "n_mc": 400})
    out = run_point(NAME, "se", {"channel": "sign-z1z2", "p": 0, "alpha": 4.0}, s, 1, (0,))
    assert np.all(np.isfinite(out["overlap"][:2, :2])) and np.isnan(out["overlap"][2, 2])
    assert np.trace(out["overlap"][:2, :2]) > 0.1


def test_gamp_point_runs():
    m = get_model(NAME)
    s = m.check_settings("gamp", {"d": 100, "n_seeds": 2, "max_iter": 5})
    out = run_point(NAME, "gamp", {"channel": "sign-z1z2", "p": 0, "alpha": 4.0}, s, 1, (0,))
    assert out["overlap"].shape == (2, 6, 3, 3)
    assert abs(out["overlap_se"][0, 0] - 0.64384) < 1e-4 and out["overlap_se"][0, 1] == 0.0


def test_bad_points():
    m = get_model(NAME)
    with pytest.raises(ParameterError):
        m.check_point("threshold", {"channel": "norm2", "p": 0})
    with pytest.raises(ParameterError):
        m.check_point("threshold", {"channel": "z1z2", "p": 2})
    with pytest.raises(ParameterError):
        m.check_point("se", {"channel": "norm2", "p": 3, "alpha": 1.0})
