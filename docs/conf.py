"""Sphinx configuration of the seqphase manual: `python -m sphinx -W -b html docs docs/_build/html`.

Markdown stays Markdown (myst-parser); tutorials are MyST notebooks executed at build time (myst-nb);
the API reference comes from the numpydoc-style docstrings (autodoc + numpydoc)."""

from __future__ import annotations

import sys
from pathlib import Path

import seqphase

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

project = "seqphase"
author = "the seqphase developers"
release = seqphase.__version__
version = release

extensions = [
    "myst_nb",  # also registers myst-parser for the .md pages
    "sphinx.ext.autodoc",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "seqphase_reference",  # docs/_ext: the CLI, models, sweeps and papers tables generated from the code
    "seqphase_intersphinx",  # docs/_ext: an unreachable inventory leaves plain text, not a failed -W build
]

source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# tutorials are executed at every build; a cell that raises fails the build (-W)
nb_execution_mode = "force"
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_merge_streams = True

# links to the libraries seqphase's results and clusters are made of. An inventory that cannot be fetched
# (no network) is logged, and its references stay plain code text; the build goes on (docs/_ext).
intersphinx_mapping = {
    "numpy": ("https://numpy.org/doc/stable/", None),
    "xarray": ("https://docs.xarray.dev/en/stable/", None),
    "dask": ("https://docs.dask.org/en/stable/", None),
    "distributed": ("https://distributed.dask.org/en/stable/", None),
    "zarr": ("https://zarr.readthedocs.io/en/stable/", None),
}
intersphinx_timeout = 10

autodoc_typehints = "none"
numpydoc_show_class_members = False
# the types in the docstrings' Parameters and Returns (xarray.Dataset, distributed.Client, ...) link through
# intersphinx; a type no inventory knows stays plain text. numpydoc's defaults send a few names to :ref: and
# :term: targets, which warn (and fail -W) when their inventory was not fetched: those stay plain types.
numpydoc_xref_param_type = True
numpydoc_xref_ignore = {"optional", "or", "of", "default", "type"}
numpydoc_xref_aliases = {name: name for name in ("bool", "boolean", "iterable", "sequence", "generator",
                                                   "array-like", "array_like", "scalar")}

html_theme = "pydata_sphinx_theme"
html_title = f"seqphase {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    # the top bar shows the sections of the manual (docs/index.md's toctree), all of them, no "More"
    "header_links_before_dropdown": 8,
}
# the single pages of the top bar have no section to list in the left sidebar
html_sidebars = {"getting-started": [], "cite": [], "changelog": []}
