"""Resource errors of the store's file system, as one line: the store, the error, the fix.

A full file system (ENOSPC), a quota (EDQUOT), a read-only mount (EROFS), permissions (EACCES,
EPERM) and the open-file limit (EMFILE, ENFILE) are not bugs: they are reported as
`seqphase: error: <store>: <what> (writing <file>) (fix: ...)`. Nothing stored is lost by them:
chunks are replaced atomically and the `status` flags are written last, so the points of a batch
that could not be written stay pending, and a rerun once the cause is fixed computes exactly those.
"""

from __future__ import annotations

import errno

from seqphase.core.errors import StoreError

_RERUN = "then rerun the same command: stored points are kept, the rest are computed"
RESOURCE_ERRORS = {
    errno.ENOSPC: ("no space left on the file system", f"free space there or use another --store, {_RERUN}"),
    errno.EDQUOT: ("disk quota exceeded", f"free space within your quota (quota -s, lfs quota) or use another "
                   f"--store, {_RERUN}"),
    errno.EROFS: ("the file system is read-only", f"use a writable --store, {_RERUN}"),
    errno.EACCES: ("permission denied", f"make the store writable for you (ls -ld, chmod) or use another --store, "
                   f"{_RERUN}"),
    errno.EPERM: ("operation not permitted", f"make the store writable for you (ls -ld, chmod) or use another "
                  f"--store, {_RERUN}"),
    errno.EMFILE: ("too many open files", f"raise the limit (ulimit -n 4096), {_RERUN}"),
    errno.ENFILE: ("too many open files on this host", f"close other programs or raise fs.file-max, {_RERUN}"),
}


class StoreResourceError(StoreError):
    """A resource error of the store's file system; `during_run` once the sweep had started."""

    def __init__(self, field, message, fix, during_run=False):
        super().__init__(field, message, fix)
        self.during_run = during_run


def resource_error(exc, store_path, during_run=False):
    """The one-line StoreResourceError for an OSError of the store's file system, or None."""
    if not isinstance(exc, OSError) or exc.errno not in RESOURCE_ERRORS:
        return None
    what, fix = RESOURCE_ERRORS[exc.errno]
    if exc.filename:
        what += f" ({exc.filename})"
    if during_run:
        what += "; the run stopped, points not yet written are pending"
    return StoreResourceError(str(store_path) if store_path else "store", what, fix, during_run=during_run)
