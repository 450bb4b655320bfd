"""The finite-difference step of the SE's Newton stage stays where the cavity I - Q + eps I is positive
definite: next to perfect recovery with a small eps (2 layers, alpha = 1.2, eps = 1e-6) the forward step +h
on an off-diagonal entry would leave it, and the SE point failed there."""

import numpy as np
import pytest

from seqphase.core.errors import ParameterError
from seqphase.core.smi.se import _difference_step, cavity


def _min_eig(Q, eps):
    return np.linalg.eigvalsh(cavity(Q, eps)).min()


def test_the_forward_step_is_kept_where_the_cavity_allows_it():
    Q = np.array([[0.5, 0.1], [0.1, 0.4]])
    X, delta = _difference_step(Q, 0, 1, 1e-4, 1e-3)
    assert delta == 1e-4
    assert X[0, 1] == X[1, 0] == 0.1 + 1e-4


def test_a_step_that_would_leave_the_cavity_is_turned_or_shrunk():
    # I - Q has eigenvalues 1e-5 and 2e-3 (eigenvectors (1, 1) and (1, -1)): +h on Q_01 lowers the smallest by h
    U = np.array([[1.0, 1.0], [1.0, -1.0]]) / np.sqrt(2.0)
    Q = np.eye(2) - U @ np.diag([1e-5, 2e-3]) @ U.T
    eps = 1e-6
    assert _min_eig(Q, eps) > 0
    bad = Q.copy()
    bad[0, 1] = bad[1, 0] = Q[0, 1] + 1e-4
    assert _min_eig(bad, eps) <= 0  # the old rule's step
    X, delta = _difference_step(Q, 0, 1, 1e-4, eps)
    assert delta != 1e-4 and _min_eig(X, eps) > 0
    assert abs(delta) <= 1e-4


def test_no_feasible_step_is_one_line_naming_eps():
    Q = np.eye(2)  # I - Q = 0: only eps keeps the cavity positive, and eps = 0
    with pytest.raises(ParameterError, match="method.eps"):
        _difference_step(Q, 0, 1, 1e-4, 0.0)
