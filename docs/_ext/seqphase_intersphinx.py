"""Keep an unreachable intersphinx inventory from failing the `-W` build.

When no location of an inventory can be fetched (no network, a site down), `sphinx.ext.intersphinx` logs one
warning, "failed to reach any of the inventories ...". It carries no warning type, so `suppress_warnings`
cannot name it, and `-W` turns it into an error. This extension lowers that one record to an info line on
the intersphinx logger itself, before any handler sees it: the message stays in the build log, and the
references into that inventory render as plain code text. Every other warning, a broken reference of the
manual's own included, still fails the build.
"""

from __future__ import annotations

import logging

# sphinx.util.logging.getLogger("sphinx.ext.intersphinx") logs through the standard logger of this name
INTERSPHINX_LOGGER = "sphinx.sphinx.ext.intersphinx"
UNREACHABLE = "failed to reach any of the inventories"


class UnreachableInventoryIsInfo(logging.Filter):
    """Lower the "failed to reach any of the inventories" warning to INFO; pass every record on."""

    def filter(self, record):
        if record.levelno == logging.WARNING and str(record.msg).startswith(UNREACHABLE):
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg = "intersphinx: no inventory reached, its references stay plain text: " + str(record.msg)
        return True


def setup(app):
    logger = logging.getLogger(INTERSPHINX_LOGGER)
    if not any(isinstance(f, UnreachableInventoryIsInfo) for f in logger.filters):
        logger.addFilter(UnreachableInventoryIsInfo())
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
