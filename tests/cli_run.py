"""Two ways to run `seqphase ARGS`, shared by the CLI tests of every family: `cli`, the real console entry
point in a subprocess (for what the process itself does: exit codes of the real process, signals, pipes,
imports), and `cli_here`, the same `seqphase.cli.main` called in this process (for what the CLI says and
does, without ~3 CPU-s of imports per call). `on_cluster(client)` replaces `--workers N` in a run that does
not test the embedded cluster's start: it attaches to the tests' shared cluster (tests/conftest.py)."""

import contextlib
import io
import subprocess
import sys
import traceback
import warnings


def cli(*args, timeout=600):
    """Run `python -m seqphase.cli ARGS`: (exit code, stdout, stderr)."""
    out = subprocess.run([sys.executable, "-m", "seqphase.cli", *map(str, args)], capture_output=True, text=True,
                         timeout=timeout)
    return out.returncode, out.stdout, out.stderr


def cli_here(*args):
    """Call `seqphase.cli.main(ARGS)` here with stdout and stderr captured: (exit code, stdout, stderr), as
    the process would end: a SystemExit gives its code (a message: printed, code 1), an uncaught exception
    code 1 with its traceback in stderr."""
    from seqphase.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _warnings_as_a_process():
        try:
            code = main([str(arg) for arg in args])
        except SystemExit as exc:
            code = exc.code
            if code is not None and not isinstance(code, int):
                print(code, file=sys.stderr)
                code = 1
        except Exception:
            traceback.print_exc()
            code = 1
    return (code or 0), out.getvalue(), err.getvalue()


def on_cluster(client):
    """The CLI options that run on `client`'s scheduler (its TLS credentials are in Dask's configuration)."""
    return ["--cluster", client.scheduler.address]


@contextlib.contextmanager
def _warnings_as_a_process():
    """Warnings filtered as in a fresh interpreter (not as pytest filters them) and printed to sys.stderr,
    so that a warning the real process would print lands in the captured stderr."""

    def to_stderr(message, category, filename, lineno, file=None, line=None):
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    with warnings.catch_warnings():
        warnings.resetwarnings()
        for category in (ResourceWarning, ImportWarning, PendingDeprecationWarning, DeprecationWarning):
            warnings.simplefilter("ignore", category)
        warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
        warnings.showwarning = to_stderr
        yield
