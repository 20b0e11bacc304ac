"""Reading the YAML files the CLI is given, with failures as one-line errors naming the option."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from numalab.model.errors import ValidationError


def load_yaml(path: Path, option: str) -> Any:
    """Read one YAML document; unreadable or malformed files become a one-line ValidationError."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValidationError(option, f"cannot read {path}: {exc.strerror}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ValidationError(option, f"{path} is not valid YAML{where}") from None
