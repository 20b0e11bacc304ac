"""Load the e2e suite's pure modules (e2e/ is its own pytest project, not a package) for unit tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

E2E_DIR = Path(__file__).resolve().parents[2] / "e2e"


def load_e2e_module(name: str) -> ModuleType:
    """Import e2e/<name>.py under the name `numalab_e2e_<name>`, so it cannot shadow anything."""
    qualified = f"numalab_e2e_{name}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, E2E_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    spec.loader.exec_module(module)
    return module


# kube.py imports api_outages as the suite does (e2e/ on sys.path): the same module under both names.
sys.modules.setdefault("api_outages", load_e2e_module("api_outages"))
