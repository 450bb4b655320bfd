"""Output channels P(y|z) (p = 1), one family per file; see ``base.Channel`` for conventions."""

from .base import Channel
from .linear import LinearChannel
from .phase import AbsChannel, SquareChannel
from .sign import SignChannel

CHANNELS = {
    "linear": LinearChannel,
    "sign": SignChannel,
    "abs": AbsChannel,
    "square": SquareChannel,
}

__all__ = ["Channel", "LinearChannel", "SignChannel", "AbsChannel", "SquareChannel", "CHANNELS"]
