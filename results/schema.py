"""The store's schema, shared by every module of results/ (store, writer, verify, migrate, query): format
and layout numbers, chunk budgets, the status codes and the ledger's variables, the codecs of a layout-2
array, and two small helpers. It imports nothing of seqphase, so the modules that use it never import
each other in a loop.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import warnings

import numpy as np

STORE_FORMAT = 1
# Layout of a sweep group: 1 (attribute absent) = one chunk per point, no checksums; 2 = chunks of many
# points, crc32c on every chunk. Both are plain zarr v3, read by the same code.
LAYOUT = 2
CHUNK_BYTES = 4 << 20      # uncompressed bytes of one chunk of an array, at most (unless one point is larger)
CHUNK_POINTS = 65536       # points in one chunk, at most
DEFAULT_STORE = "seqphase.zarr"  # in the working folder, unless $SEQPHASE_STORE names another


def default_store():
    """The store used without --store: $SEQPHASE_STORE if set, else ./seqphase.zarr."""
    return os.environ.get("SEQPHASE_STORE") or DEFAULT_STORE

NOT_REQUESTED, PENDING, DONE, FAILED = 0, 1, 2, 3
STATUS_NAMES = {NOT_REQUESTED: "not requested", PENDING: "pending", DONE: "done", FAILED: "failed"}

# name -> (dtype, fill, meaning)
LEDGER = {
    "status": ("i1", 0, "0 not requested, 1 pending, 2 done, 3 failed"),
    "point_hash": ("U64", "", "SHA-256 of the point's parameters, settings and algorithm version"),
    "error": ("U256", "", "reason of the last failure ('' if none)"),
    "runtime_s": ("f8", np.nan, "seconds of work: the point's wall time on its worker, or the sum over its "
                                "works (those kept from earlier runs included; NaN if one was kept without it)"),
    "finished_at": ("f8", np.nan, "when the point was stored (a CF time: datetime64 once decoded)"),
    "attempts": ("i2", 0, "how many runs have computed this point"),
    "host": ("U64", "", "host that computed the point"),
    "worker": ("U64", "", "Dask worker address that computed the point"),
    "slurm_job_id": ("U32", "", "SLURM job of the worker, if any"),
}
ERROR_WIDTH = 256


@contextlib.contextmanager
def _quiet():
    """Fixed-width unicode arrays are stable in practice; silence zarr's v3 'unstable dtype' notes."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*unstable.*")
        warnings.filterwarnings("ignore", message=".*does not have a Zarr V3 specification.*")
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", message=".*[Cc]onsolidated metadata.*")
        warnings.filterwarnings("ignore", message=".*not recognized as a component of a Zarr hierarchy.*")
        yield


def codecs():
    """Bytes-to-bytes codecs of every array of a layout-2 group: zstd, then a crc32c checksum."""
    from zarr.codecs import Crc32cCodec, ZstdCodec

    return (ZstdCodec(), Crc32cCodec())


def _short(exc):
    """One line of an exception's text, at most 160 characters (for ledgers and one-line errors)."""
    text = " ".join(str(exc).split())
    return (text[:160] + "...") if len(text) > 160 else (text or type(exc).__name__)


def now_iso():
    """The current UTC time in ISO 8601, to the second (run records, manifests, locks)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
