"""Checks shared by the 2- and 3-layer SMI channel tests."""

import numpy as np

from seqphase.core.numerics import psd_sqrt
from seqphase.core.smi import se as sse


def assert_nishimori(ch, Q, draws):
    """E[sum_t g_t g_t^T] = -E[sum_t dg_tt] per layer on the SE's own draws at overlap Q (the identity holds
    for the exact posterior): the mean difference within 4 Monte Carlo standard errors of itself."""
    V = sse.cavity(Q, 0.0)
    om = np.einsum("ab,nbt->nat", psd_sqrt(Q), draws.xi)
    z = om + np.einsum("ab,nbt->nat", psd_sqrt(V), draws.u)
    g, dg = ch.g_out_tokens(ch.labels_of_z(z), om, V)
    diff = np.einsum("nat,nat->na", g, g) + np.einsum("ntaa->na", dg)
    err = diff.std(0) / np.sqrt(diff.shape[0])
    assert np.all(np.abs(diff.mean(0)) < 4 * err + 1e-9), (diff.mean(0), err)

