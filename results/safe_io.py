"""Reading a file that someone else may have written: a store's metadata, chunks, manifest, lock and kept
works, a spec, a SLURM profile. Every such read goes through `read_bytes`.

A file handed over is data, and the name it sits under says nothing about what it is: it may be a FIFO
(opening it for reading waits for a writer forever), a device (/dev/zero never ends), a sparse file of
many gigabytes, or a symbolic link to anything the user can read. So a read
- opens with O_NONBLOCK (a FIFO opens at once instead of waiting) and, under a store, with O_NOFOLLOW on
  every component below the store's folder (a link anywhere below it is refused, not followed);
- checks with `fstat` on the open file that it is a regular file and that its size is within the cap
  stated for its kind (`LIMITS`), before reading a byte;
- reads at most cap + 1 bytes, so a file that grows while it is read is refused too.
Each refusal is the caller's one-line error type (StoreError by default) naming the file and the fix.

`loads_json` parses JSON whose nesting could be deep enough to exhaust Python's recursion (a 400 kB file
of 200,000 brackets): too deep is a ValueError, like any other malformed JSON.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

from seqphase.core.errors import StoreError
from seqphase.sweeps.limits import MAX_POINT_BYTES

MiB = 2 ** 20
#: the most bytes a file of each kind may hold; a larger one is refused before it is read
LIMITS = {
    "metadata": 16 * MiB,        # a zarr.json (a group's holds its runs and, when consolidated, every array's)
    "manifest": 64 * MiB,        # .seqphase/manifests/NAME.json: two numbers per chunk file
    "lock": 64 * 2 ** 10,        # .seqphase-driver.lock: host, pid, times, token
    "chunk": MAX_POINT_BYTES + MAX_POINT_BYTES // 64,  # one chunk holds at most one point's limit (+ codec overhead)
    "work": MAX_POINT_BYTES + MAX_POINT_BYTES // 64,   # a kept work (.npz) of one point
    "spec": 1 * MiB,             # a sweep spec or a SLURM profile (.toml)
}
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)
_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _size(n):
    return f"{n / MiB:,.0f} MiB" if n >= MiB else f"{n:,} bytes"


def read_bytes(path, kind, below=None, error=StoreError, fix=None):
    """The bytes of the regular file `path`, at most LIMITS[kind] of them. `below`: the store's folder,
    which `path` lies under; no component after it may be a symbolic link (`path` given by the user
    itself, without `below`, may be one). FileNotFoundError when it is absent; `error(path, why, fix)`
    when it is a link, a folder, a FIFO, a device, too large, or a component of its path is a file."""
    path = Path(path)
    limit = LIMITS[kind]
    fix = fix or "replace it by the regular file it should be (restore it from a copy), or move it aside"
    fd = _open(path, below, error, fix)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(str(path), f"is not a regular file ({_kind(info.st_mode)})", fix)
        if info.st_size > limit:
            raise error(str(path), f"is {_size(info.st_size)}, more than the {_size(limit)} a {kind} file may be",
                        fix)
        chunks, left = [], limit + 1
        while left > 0:
            data = os.read(fd, min(left, 4 * MiB))
            if not data:
                break
            chunks.append(data)
            left -= len(data)
        if left <= 0:
            raise error(str(path), f"grew past the {_size(limit)} a {kind} file may be while it was read", fix)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path, kind, below=None, error=StoreError, fix=None):
    """`read_bytes` decoded as UTF-8 (anything else: `error`)."""
    data = read_bytes(path, kind, below, error, fix)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(str(path), f"is not UTF-8 text (byte {exc.start}: {data[exc.start:exc.start + 1]!r})",
                    fix or "save it as UTF-8 text") from None


def read_toml(path, error, fix):
    """(text, document) of a user's TOML file (a spec, a SLURM profile): a regular file of at most the
    "spec" size, UTF-8, well-formed and not nested deeper than Python's recursion reaches; `error` naming
    the file otherwise."""
    try:  # Python >= 3.11
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover
        import tomli as tomllib

    text = read_text(path, "spec", error=error, fix=f"give a UTF-8 TOML file of at most {_size(LIMITS['spec'])}")
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(str(path), f"malformed TOML: {exc}", fix) from None
    except RecursionError:
        raise error(str(path), "malformed TOML: nested too deeply", fix) from None


def loads_json(text):
    """json.loads, where nesting too deep for Python's recursion is a ValueError like other malformed JSON."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def _open(path, below, error, fix):
    """A descriptor of `path` opened for reading without blocking; below `below`, component by component
    without following a link."""
    if below is None:
        return _checked_open(lambda: os.open(path, _READ), path, error, fix)
    below = Path(below)
    parts = path.relative_to(below).parts
    fd = _checked_open(lambda: os.open(below, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)), below, error, fix)
    try:
        here = below
        for i, part in enumerate(parts):
            here = here / part
            last = i == len(parts) - 1
            flags = _READ | _NO_FOLLOW if last else os.O_RDONLY | _NO_FOLLOW | getattr(os, "O_DIRECTORY", 0)
            step = _checked_open(lambda: os.open(part, flags, dir_fd=fd), here, error, fix)
            os.close(fd)
            fd = step
        return fd
    except BaseException:
        os.close(fd)
        raise


def _checked_open(opener, path, error, fix):
    try:
        return opener()
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK) or (exc.errno == errno.ENOTDIR and os.path.islink(path)):
            raise error(str(path), "is a symbolic link: what a store holds is read only from the store itself",
                        "replace the link by what it points to (a copy), or move it aside") from None
        if exc.errno == errno.ENOTDIR:
            raise error(str(path), "cannot be there: a folder on its path is a file", fix) from None
        if exc.errno == errno.EISDIR:
            raise error(str(path), "is a folder, not a file", fix) from None
        raise


def _kind(mode):
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a plain file"


def store_kind(path):
    """The kind (`LIMITS`) of a file in a store, from where it lies and its name."""
    path = Path(path)
    if path.name == "zarr.json":
        return "metadata"
    if ".seqphase" in path.parts:
        return "manifest"
    if path.suffix == ".npz":
        return "work"
    return "chunk"


def refuse_special(top, where, error=StoreError):
    """`error` for the first entry under the folder `top` (itself included) that is a symbolic link, neither
    a folder nor a regular file (a FIFO, a device, a socket), or a file larger than its kind may be
    (`store_kind`); `top` absent is fine. Nothing is opened: one lstat per entry."""
    top = Path(top)
    if top.is_symlink():
        raise _refused(top, "is a symbolic link", where, error)
    if not top.exists():
        return
    if not top.is_dir():
        raise _refused(top, f"is not a folder ({_kind(top.stat().st_mode)})", where, error)
    for root, dirs, files in os.walk(top):
        for entry in sorted(dirs + files):
            path = Path(root) / entry
            info = os.lstat(path)
            mode = info.st_mode
            if stat.S_ISLNK(mode):
                raise _refused(path, "is a symbolic link", where, error)
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise _refused(path, f"is not a regular file ({_kind(mode)})", where, error)
            kind = store_kind(path)
            if stat.S_ISREG(mode) and info.st_size > LIMITS[kind]:
                raise _refused(path, f"is {_size(info.st_size)}, more than the {_size(LIMITS[kind])} a {kind} "
                               "file may be", where, error)


def _refused(path, why, where, error):
    return error(where, f"{path} {why}: a store holds only folders and regular files of bounded size, read and "
                 "written in place", "replace it by the folder or file it should be (a copy), or move it aside; "
                 "nothing was written")
