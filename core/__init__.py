"""seqphase.core: the numerical science (numpy/scipy only; no Dask, no I/O).

Shared, importing no family: numerics (quadrature, fixed points, the vectorised bisection of many brackets,
small linear algebra), search (the threshold searches: routes side by side, the one search loop), channel
(the channel protocol and the scalar channels), gamp (the one GAMP loop and its trace), parametric_curve
(the SE solver of the RIE families), figures (generic drawing), models (the model/method contract), family
and registry (the families registered under the entry-point group `seqphase.models`, "module:Class" names
resolved), agreement (the rows of the agreement table), errors; the spectral denoisers rie (symmetric) and
rectangular_rie; optim (Adam and GD). One folder per family with the same files (its FAMILY in __init__,
channels, se, gamp, thresholds, model, figures, papers, checks; its sweep specs in sweeps/ and published data
in reference/): glm/, multiindex/, smi/, aim/, quadratic/ (models `quadratic` and `quadratic-erm`), bsr/.
Conventions: alpha = n/d, rho = E x^2, overlap m, MSE V = rho - m, SNR mhat.
"""
