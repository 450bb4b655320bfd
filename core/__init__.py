"""seqphase.core: the numerical science (numpy/scipy only; no Dask, no I/O).

Shared, importing no family: numerics (quadrature, fixed points, bisections, small linear algebra),
channel (the channel protocol and the scalar channels), gamp (the one GAMP loop), figures (generic
drawing), models (the model/method contract and the registry), errors. One folder per family with the
same files: glm/, multiindex/, smi/ (channels, se, gamp, thresholds, model, figures).
Conventions: alpha = n/d, rho = E x^2, overlap m, MSE V = rho - m, SNR mhat.
"""
