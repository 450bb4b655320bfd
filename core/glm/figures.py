"""Figures of GLM sweeps: the generic SE, GAMP and threshold figures of core/figures.py fit the GLM's
variables as they are (overlap m as a 1 x 1 matrix, mse, gen_error, the AMP and informed branches,
alpha_stability / alpha_bisection / alpha_it per transition)."""

from seqphase.core.figures import plot_gamp, plot_se, plot_threshold

__all__ = ["plot_se", "plot_gamp", "plot_threshold"]
