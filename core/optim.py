"""First-order optimisers on numpy arrays, updated in place (shared by the families' GD experiments:
core/aim/gd.py, core/quadratic/gd.py). Imports numpy only, never a family.

Both take the array to optimise at construction (to shape their state) and expose `step(W, grad)`, so a
training loop can swap one for the other. Weight decay is not included: the experiments that use these
minimise the plain loss.
"""

from __future__ import annotations

import math

import numpy as np

#: Adam's hyper-parameters (torch defaults)
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


class Adam:
    """torch.optim.Adam (no weight decay, no amsgrad) on one array, updated in place; the moments are
    kept in the array's dtype."""

    def __init__(self, W, lr, betas=ADAM_BETAS, eps=ADAM_EPS):
        self.lr, (self.b1, self.b2), self.eps = float(lr), betas, float(eps)
        self.m = np.zeros_like(W)
        self.v = np.zeros_like(W)
        self.t = 0

    def step(self, W, grad):
        self.t += 1
        self.m *= self.b1
        self.m += (1.0 - self.b1) * grad
        self.v *= self.b2
        self.v += (1.0 - self.b2) * grad * grad
        correction1 = 1.0 - self.b1 ** self.t
        correction2 = 1.0 - self.b2 ** self.t
        denominator = np.sqrt(self.v)
        denominator /= math.sqrt(correction2)
        denominator += self.eps
        W -= (self.lr / correction1) * self.m / denominator


class GradientDescent:
    """Plain gradient descent W <- W - lr grad (torch.optim.SGD without momentum, on the full batch)."""

    def __init__(self, W, lr):
        self.lr = float(lr)
        self.t = 0

    def step(self, W, grad):
        self.t += 1
        W -= self.lr * grad


OPTIMISERS = {"gd": GradientDescent, "adam": Adam}
