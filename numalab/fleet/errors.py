"""The one error the fleet simulation raises for bad input or a control plane that will not come up."""

from __future__ import annotations

import re


class FleetError(RuntimeError):
    """The simulation cannot run as asked; the message (one line) names the input or process and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(re.sub(r"\s*\n\s*", " ", message.strip()))
