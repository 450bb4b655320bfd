"""seqphase.core: the numerical science (numpy/scipy only; no Dask, no I/O).

quadrature (Gaussian rules), priors (input denoisers), channels/ (output denoisers), se (state
evolution), gamp (finite-size GAMP), thresholds (critical alphas, two ways each).
Conventions: alpha = n/d, rho = E x^2, overlap m, MSE V = rho - m, SNR mhat.
"""
