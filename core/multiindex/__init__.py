"""Multi-index models (p > 1): channels, p x p state evolution, GAMP and the grand staircase."""
