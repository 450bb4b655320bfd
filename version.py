"""The package version, in a module of its own so that any layer can read it without importing the
package's public surface (`seqphase/__init__.py` imports results/, which would make an import loop)."""

__version__ = "1.0.0"
