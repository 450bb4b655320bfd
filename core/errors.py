"""Errors that reach the user as one line: what is wrong, where, and how to fix it.

Every layer (core, sweeps, results, cluster) raises a subclass of `SeqphaseError`; the CLI prints
`error: <field>: <message> (fix: <fix>)` and exits with code 2, before anything is written.
"""


class SeqphaseError(Exception):
    """Base class: `field` names what is wrong (a spec key, a CLI option, a store path)."""

    def __init__(self, field, message, fix=None):
        self.field = field
        self.message = message
        self.fix = fix
        super().__init__(self.one_line())

    def one_line(self):
        text = f"{self.field}: {self.message}" if self.field else self.message
        if self.fix:
            text += f" (fix: {self.fix})"
        return text.replace("\r", "\\r").replace("\n", "\\n")  # one line, whatever a name holds


class ParameterError(SeqphaseError):
    """A model parameter or method setting that is unknown or out of range."""


class SpecError(SeqphaseError):
    """A malformed sweep spec, an unknown sweep name, or a bad --set override."""


class StoreError(SeqphaseError):
    """A store that is foreign, corrupted, locked, or holds a different sweep under the same name."""


class ClusterError(SeqphaseError):
    """A cluster that cannot be reached or started."""
