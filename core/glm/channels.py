"""The GLM's output channels P(y | z), z = F x in R (p = 1): the scalar channels of core/channel.py
(linear y = z + sqrt(Delta) n, sign, |z|, z^2). They live in the shared module because the multi-index
family's p = 1 abs and square channels are the same channels (one kernel, two families); this table is
the GLM's `channel` parameter."""

from seqphase.core.channel import SCALAR_CHANNELS, AbsChannel, LinearChannel, SignChannel, SquareChannel

CHANNELS = dict(SCALAR_CHANNELS)

__all__ = ["CHANNELS", "LinearChannel", "SignChannel", "AbsChannel", "SquareChannel"]
