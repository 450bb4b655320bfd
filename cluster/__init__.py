"""Where tasks run: an embedded local Dask cluster (`local.py`, the default), an existing scheduler
(`address.py`), or Dask workers as SLURM jobs (`slurm.py`, dask-jobqueue; `seqphase submit` also runs
the driver as a job). `base.py` holds what they share and `connect()`, which picks one of them.

`security.py` makes every scheduler started here speak TLS only (`Access`: the options of who connects).
`connect()` yields a `distributed.Client`; `run_sweep` (driver.py) submits points to it. This package
knows nothing of the physics: workers call `seqphase.cluster.tasks.execute_point`, which calls core.
"""

from seqphase.cluster.base import connect
from seqphase.cluster.driver import RunSummary, run_sweep
from seqphase.cluster.security import Access

__all__ = ["connect", "run_sweep", "RunSummary", "Access"]
