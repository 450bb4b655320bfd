"""Every registered channel of every family passes the protocol battery, and every shipped channel and prior
of the contract (`seqphase.Likelihood`, `seqphase.Prior`) passes its battery: `seqphase.testing`
(`check_channel_protocol`, `check_likelihood`, `check_prior`), the module a user's own class is checked
with. A new family's channel gets all of this by being added to `REGISTERED` (test_every_channel_listed
fails until it is).
"""

from __future__ import annotations

import pytest

from seqphase import testing
from seqphase.core.aim.channels import CHANNELS as AIM_CHANNELS
from seqphase.core.aim.channels import HardmaxChannel, LinearChannel as AIMLinearChannel, SoftmaxChannel
from seqphase.core.bsr.channels import BSRChannel
from seqphase.core.channel import SCALAR_CHANNELS
from seqphase.core.glm.channels import CHANNELS as GLM_CHANNELS
from seqphase.core.glm.priors import PRIORS as GLM_PRIORS
from seqphase.core.multiindex.channels import MI_CHANNELS, make_channel
from seqphase.core.quadratic.channels import QuadraticChannel
from seqphase.core.smi.channels import AttentionChannel

# (family, channel name, factory, exact): exact = closed form (finite differences to ~h^2); the others
# integrate the posterior by quadrature or adaptive grids, whose derivative matches the analytic dg
# only to the rule's own accuracy.
REGISTERED = [
    ("glm", "linear", lambda: GLM_CHANNELS["linear"](0.1), True),
    ("glm", "linear-noiseless", lambda: GLM_CHANNELS["linear"](0.0), True),
    ("glm", "sign", lambda: GLM_CHANNELS["sign"](), True),
    ("glm", "abs", lambda: GLM_CHANNELS["abs"](), True),
    ("glm", "square", lambda: GLM_CHANNELS["square"](), True),
    ("multiindex", "z1z2", lambda: make_channel("z1z2"), False),
    ("multiindex", "sign-z1z2", lambda: make_channel("sign-z1z2"), False),
    ("multiindex", "norm2", lambda: make_channel("norm2", 2), False),
    ("multiindex", "norm2-p1", lambda: make_channel("norm2", 1), True),
    ("multiindex", "z1z2z3", lambda: make_channel("z1z2z3"), False),
    ("multiindex", "sign-z1z2z3", lambda: make_channel("sign-z1z2z3"), False),
    ("multiindex", "committee3", lambda: make_channel("committee3"), False),
    ("multiindex", "staircase", lambda: make_channel("staircase"), False),
    ("multiindex", "square", lambda: make_channel("square"), True),
    ("multiindex", "abs", lambda: make_channel("abs"), True),
    ("smi", "attention", lambda: AttentionChannel(2, 1.0), False),
    ("smi", "attention-small-skip", lambda: AttentionChannel(2, 0.1), False),
    # AIM: the folded T x T index (p = T(T+1)/2); labels are (n, k) rows. The hardmax "paper" g_out is not
    # a Bayes g_out (it fails Nishimori by design, spec aim.md §2.5): its Jacobian is tested in tests/aim.
    ("aim", "softmax", lambda: SoftmaxChannel(3), True),
    ("aim", "softmax-T2-beta5", lambda: SoftmaxChannel(2, 5.0), True),
    ("aim", "linear", lambda: AIMLinearChannel(2), True),
    ("aim", "hardmax", lambda: HardmaxChannel(2, "exact"), True),
    ("quadratic", "quadratic", lambda: QuadraticChannel(0.25, 0.5), True),
    ("quadratic", "quadratic-noiseless", lambda: QuadraticChannel(0.0, 0.5), True),
    ("bsr", "bsr", lambda: BSRChannel(0.1), True),
    ("bsr", "bsr-noiseless", lambda: BSRChannel(0.0), True),
]
IDS = [f"{family}:{name}" for family, name, _, _ in REGISTERED]


def test_every_channel_listed():
    """Every entry of every family's channel table is in the battery."""
    listed = {(family, name.split("-p1")[0]) for family, name, _, _ in REGISTERED}
    for name in GLM_CHANNELS:
        assert ("glm", name) in listed
    for name in MI_CHANNELS:
        assert ("multiindex", name) in listed
    assert ("smi", "attention") in listed
    for name in AIM_CHANNELS:
        assert ("aim", name) in listed
    assert ("quadratic", "quadratic") in listed
    assert ("bsr", "bsr") in listed
    assert set(GLM_CHANNELS) == set(SCALAR_CHANNELS)


@pytest.mark.parametrize("factory, exact", [pytest.param(f, e, id=i) for (_, _, f, e), i in zip(REGISTERED, IDS)])
def test_protocol_battery(factory, exact):
    """Nishimori, the Jacobian against finite differences, batches, edges and (p = 1) the scalar kernel:
    `seqphase.testing.check_channel_protocol` (its docstring states each tolerance)."""
    testing.check_channel_protocol(factory(), exact=exact)


#: the shipped channels of the contract with a finite likelihood, and the noisy forms of the noiseless ones
#: (the battery of a continuous y runs its per-sample rule on 200,000 draws: ~30 s, in the slow suite)
SLOW = pytest.mark.slow
SHIPPED_LIKELIHOODS = [
    pytest.param(lambda: GLM_CHANNELS["sign"](), id="sign"),
    pytest.param(lambda: GLM_CHANNELS["linear"](0.1), id="linear-delta-0.1", marks=SLOW),
    pytest.param(lambda: GLM_CHANNELS["abs"]().noisy(0.05), id="abs-noisy-0.05", marks=SLOW),
    pytest.param(lambda: GLM_CHANNELS["square"]().noisy(0.05), id="square-noisy-0.05", marks=SLOW),
    pytest.param(lambda: GLM_CHANNELS["linear"](0.0).noisy(0.05), id="linear-noiseless-noisy-0.05", marks=SLOW),
    pytest.param(lambda: make_channel("sign-z1z2"), id="sign-z1z2"),
    pytest.param(lambda: make_channel("z1z2").noisy(0.1), id="z1z2-noisy-0.1", marks=SLOW),
    pytest.param(lambda: make_channel("norm2", 2).noisy(0.1), id="norm2-noisy-0.1", marks=SLOW),
]


@pytest.mark.parametrize("factory", SHIPPED_LIKELIHOODS)
def test_shipped_channels_pass_check_likelihood(factory):
    testing.check_likelihood(factory())


@pytest.mark.parametrize("name", [pytest.param(name, marks=() if name == "rademacher" else SLOW)
                                  for name in sorted(GLM_PRIORS)])
def test_shipped_priors_pass_check_prior(name):
    testing.check_prior(GLM_PRIORS[name](0.3) if name == "gauss-bernoulli" else GLM_PRIORS[name]())
