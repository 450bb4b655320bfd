"""The real console entry point in a subprocess, shared by the CLI tests of every family."""

import subprocess
import sys


def cli(*args, timeout=600):
    """Run `python -m seqphase.cli ARGS`: (exit code, stdout, stderr)."""
    out = subprocess.run([sys.executable, "-m", "seqphase.cli", *map(str, args)], capture_output=True, text=True,
                         timeout=timeout)
    return out.returncode, out.stdout, out.stderr
