"""Multi-index models y = g(W x / sqrt d), W in R^{p x d}: channels, p x p state evolution, GAMP, the
thresholds and the grand staircase, the model (methods se, gamp, threshold) and its figures."""
