"""seqphase.core: the numerical science (numpy/scipy only; no Dask, no I/O).

Shared, importing no family: numerics (quadrature, fixed points, small linear algebra), search (the
threshold searches: routes side by side, the one search loop), channel (the channel protocol and the
scalar channels), gamp (the one GAMP loop), figures (generic drawing), models (the model/method contract
and the registry), errors; the spectral denoisers rie (symmetric) and rectangular_rie; optim (Adam and
GD). One folder per family with the same files (channels, se, gamp, thresholds, model, figures): glm/,
multiindex/, smi/, aim/, quadratic/ (models `quadratic` and `quadratic-erm`), bsr/.
Conventions: alpha = n/d, rho = E x^2, overlap m, MSE V = rho - m, SNR mhat.
"""
