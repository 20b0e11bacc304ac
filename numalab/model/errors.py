"""One error type for every rejected input, so the CLI and deploys can print it as one line."""

from __future__ import annotations


class ValidationError(ValueError):
    """Input the model refuses; `field` is the dotted path of the bad value (e.g. numa.cells[1].cpus)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
