"""The one error every way of getting Kubernetes binaries raises, so the CLI and deploys print it as one line."""

from __future__ import annotations

import re


class BinariesError(RuntimeError):
    """Binaries that cannot be had or are refused; the message names the bad input and where to look."""

    def __init__(self, message: str) -> None:
        # Go and tar messages can span lines (`\n\tserver response: ...`): keep the CLI's one-line convention.
        super().__init__(re.sub(r"\s*\n\s*", " ", message.strip()))
