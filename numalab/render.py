"""Jinja2 rendering of templates/: loops and substitutions only, values come from the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"


def yaml_str(value: Any) -> str:
    """A YAML double-quoted scalar: JSON strings are valid YAML, so ':' '#' and quotes stay literal."""
    return json.dumps(str(value), ensure_ascii=False)


def _environment() -> jinja2.Environment:
    if not TEMPLATES_DIR.is_dir():
        raise FileNotFoundError(f"numa-lab templates not found at {TEMPLATES_DIR} (install the project editable)")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["yaml_str"] = yaml_str
    return env


_ENV: jinja2.Environment | None = None


def render(template: str, **values: Any) -> str:
    """Render templates/<template> with values; a missing value is an error, never an empty string."""
    global _ENV
    if _ENV is None:
        _ENV = _environment()
    return _ENV.get_template(template).render(**values)


def template_path(template: str) -> Path:
    """Absolute path of a template, for pyinfra's files.template (which joins relative paths to cwd)."""
    path = TEMPLATES_DIR / template
    if not path.is_file():
        raise FileNotFoundError(f"no template {template} in {TEMPLATES_DIR}")
    return path
