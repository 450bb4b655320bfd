"""Limits checked before anything is allocated: points per sweep, the size of what a store declares, and the
memory of one finite-size instance (GAMP, GD, ERM, ...) against the memory a worker has.

- `MAX_POINTS`: a sweep (its grid, every axis multiplied) holds at most this many points. The largest
  shipped sweep has a few thousand; a range's `num` is refused above it before its values are made, and a
  grid before its points are made. A store whose arrays declare a larger grid is refused before its
  coordinates are read.
- `MAX_CHUNKS`: an array of a store has at most this many chunks (a store of one chunk per point is within
  it); `MAX_POINT_BYTES`: one point of one array (its seeds, iterations, ...) holds at most this many bytes.
- `instance_bytes`: the memory one finite-size instance allocates, estimated from d and alpha and the
  arrays its family draws; `check_memory` refuses a sweep whose largest instance does not fit in the memory
  of one worker (the SLURM profile's memory per worker process under `--cluster slurm`, else the machine's
  memory divided by the local workers).
"""

from __future__ import annotations

import math
import os

from seqphase.core.errors import ParameterError, SpecError

MAX_POINTS = 1_000_000
MAX_CHUNKS = 1_000_000
MAX_POINT_BYTES = 256 * 2 ** 20
#: How many design-matrix-sized arrays an instance holds at its peak: the draw, its normalised copy and
#: one more of the same size (the squared matrix F*F of separable GAMP, the products of the others).
COPIES = 3


def check_count(count, where, what="points"):
    """SpecError naming `where` when a grid or a range asks for more than MAX_POINTS values."""
    if count > MAX_POINTS:
        raise SpecError(where, f"{count:,} {what} is more than the {MAX_POINTS:,} a sweep may hold",
                        "split the sweep into several (--name), or use fewer values")


def grid_size(lengths):
    return math.prod(int(n) for n in lengths)


# -- memory of one instance -----------------------------------------------------------------------------
def _design(model, params, settings):
    """(elements, bytes per element) of the largest array one instance of a finite-size method draws, or
    None for a method without an instance (SE, thresholds). Mirrors the families' `sample_instance`."""
    d = settings.get("d")
    alpha = params.get("alpha", settings.get("alpha"))
    sizes = settings.get("sizes")
    if d is None and isinstance(sizes, list) and sizes:  # onset: its largest size at the top of its windows
        d = max(sizes)
        alpha = max((v for k, v in settings.items() if k.startswith("alpha") and k.endswith("_hi")), default=None)
    if d is None or isinstance(d, bool) or not isinstance(d, (int, float)):
        return None
    d = int(d)
    try:
        alpha = float(alpha)
    except (TypeError, ValueError):
        return None
    if model == "glm":  # F (n, d), n = alpha d
        return alpha * d * d, 8
    if model == "multiindex":  # X (n, d), n = alpha d; per-sample covariances are O(n p^2)
        return alpha * d * d, 8
    if model == "smi":  # X (n, T, d), n = alpha d
        return alpha * d * d * int(params.get("T", settings.get("T", 2)) or 2), 8
    if model in ("quadratic", "quadratic-erm"):  # x (n, d), n = alpha d^2
        return alpha * d ** 3, 8
    if model == "aim":  # X (n, T, d), n = alpha d^2
        return alpha * d ** 3 * int(params.get("T", 2) or 2), 8
    if model == "bsr":  # X_f (n, d L) in float32 (or float64), n = alpha d L
        beta = float(params.get("beta", 1.0))
        L = max(1, round(beta * d))
        itemsize = 4 if settings.get("precision", "float32") == "float32" else 8
        return alpha * d * L * d * L, itemsize
    return None


def instance_bytes(model, params, settings):
    """Estimated peak memory (bytes) of one instance of a finite-size method at (params, settings): COPIES
    times its design matrix; 0 for a method without an instance."""
    design = _design(model, params, settings)
    if design is None:
        return 0
    elements, itemsize = design
    return int(COPIES * elements * itemsize)


def local_memory_per_worker(workers=None):
    """The machine's memory divided by the local workers (one per core by default)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    return total // max(1, int(workers or os.cpu_count() or 1))


def check_memory(plan, limit_bytes, setting, fix):
    """ParameterError when the largest instance of the plan needs more than `limit_bytes` (the memory of
    one worker; `setting` names where that limit comes from, `fix` how to raise it)."""
    if not limit_bytes:
        return
    worst, worst_point = 0, None
    for point in plan.points:
        params, settings = plan.point_inputs(point)
        need = instance_bytes(plan.sweep.model, params, settings)
        if need > worst:
            worst, worst_point = need, (params, settings)
    if worst > limit_bytes:
        params, settings = worst_point
        where = ", ".join(f"{k} = {params[k]:g}" for k in ("alpha",) if isinstance(params.get(k), (int, float)))
        d = settings.get("d", max(settings.get("sizes") or [0]))
        raise ParameterError("method.d" if "d" in settings else "method.sizes",
                             f"one instance at d = {d}{', ' + where if where else ''} needs "
                             f"about {worst / 2 ** 30:.1f} GiB, more than the {limit_bytes / 2 ** 30:.1f} GiB of "
                             f"one worker ({setting})", f"use a smaller d or alpha, or {fix}")


def check_plan_memory(plan, cluster, workers=None, slurm_profile=None):
    """Refuse (ParameterError) a plan whose largest instance exceeds one worker's memory: the SLURM profile's
    `memory` per job divided by its worker processes under `--cluster slurm`, the machine's memory divided
    by the local workers under `--cluster local`. A scheduler given by its address: its workers are not
    known here, nothing is checked."""
    if slurm_profile is not None:
        from dask.utils import parse_bytes

        processes = slurm_profile.n_processes
        try:
            limit = parse_bytes(slurm_profile.memory) // max(1, processes)
        except (ValueError, TypeError):
            return  # an unreadable size is the profile check's to report
        setting = (f"{slurm_profile.source}: memory = {slurm_profile.memory} per job over {processes} "
                   f"process{'es' if processes > 1 else ''}")
        fix = "raise memory (or lower processes) in the SLURM profile"
    elif cluster == "local":
        limit = local_memory_per_worker(workers)
        n = int(workers or os.cpu_count() or 1)
        setting = f"this machine's memory over {n} local worker{'s' if n > 1 else ''}"
        fix = "use fewer --workers, or run under --cluster slurm with more memory per worker"
    else:
        return
    check_memory(plan, limit, setting, fix)
