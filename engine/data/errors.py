"""User-facing errors: each says what is wrong and what to do, and is shown once at the edge.

The CLI prints `str(error)` and exits 2; the app shows it as a notification. Never a traceback.
"""


class PlannerError(Exception):
    """An error a user can act on; its message is the whole story."""


class PresetError(PlannerError):
    """A preset file is unreadable or holds a value that is not what the key needs."""

    def __init__(self, file: str, key: str | None, expected: str, got: object = None):
        self.file, self.key, self.expected, self.got = file, key, expected, got
        where = f"{file}: {key}" if key else file
        detail = f"expected {expected}"
        if got is not None:
            detail += f", got {got!r}"
        super().__init__(f"{where}: {detail}")


class StoreError(PlannerError):
    """A results database cannot be opened or used as asked."""
