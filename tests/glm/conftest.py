import pytest

from seqphase.core.glm.channels import CHANNELS, AbsChannel, LinearChannel, SignChannel, SquareChannel
from seqphase.core.glm.priors import PRIORS, GaussBernoulliPrior, GaussianPrior, RademacherPrior

# Every registered family appears here (checked in test_registry): a new channel/prior gets the
# whole battery by being added to these lists.
CHANNEL_INSTANCES = [LinearChannel(0.1), LinearChannel(0.0), SignChannel(), AbsChannel(),
                     SquareChannel()]
PRIOR_INSTANCES = [GaussianPrior(), RademacherPrior(), GaussBernoulliPrior(0.5),
                   GaussBernoulliPrior(0.1)]


def pytest_generate_tests(metafunc):
    if "channel" in metafunc.fixturenames:
        metafunc.parametrize("channel", CHANNEL_INSTANCES, ids=repr)
    if "prior" in metafunc.fixturenames:
        metafunc.parametrize("prior", PRIOR_INSTANCES, ids=repr)


@pytest.fixture
def registries():
    return CHANNELS, PRIORS
