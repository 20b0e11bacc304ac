"""The numa-align wheelhouse for a node's Python: keyed by its inputs, built once with pip from PyPI."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.tags import compatible_tags, cpython_tags
from packaging.utils import canonicalize_name, parse_wheel_filename

from numalab import wheelhouse as wheelhouse_module
from numalab.wheelhouse import PLUGIN_DIR, REQUIREMENTS, WheelhouseError, inputs_digest, wheelhouse

# What a node's CPython 3.13 on x86_64 installs (Debian 13's python3)
CP313 = {
    *cpython_tags(python_version=(3, 13), platforms=["manylinux_2_17_x86_64", "manylinux2014_x86_64"]),
    *compatible_tags(python_version=(3, 13), platforms=["manylinux_2_17_x86_64", "manylinux2014_x86_64"]),
}


def pins(requirements: Path) -> dict[str, str]:
    """name -> version of the `name==version` lines."""
    found = {}
    for line in requirements.read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            requirement = Requirement(text)
            (spec,) = requirement.specifier
            assert spec.operator == "==", f"{line!r} is not an exact pin"
            found[canonicalize_name(requirement.name)] = spec.version
    return found


@pytest.fixture
def plugin_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of plugin/'s sources and pins that the module builds from instead of the real one."""
    copy = tmp_path / "plugin"
    shutil.copytree(PLUGIN_DIR / "numa_align", copy / "numa_align", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PLUGIN_DIR / "pyproject.toml", copy)
    shutil.copy(REQUIREMENTS, copy)
    monkeypatch.setattr(wheelhouse_module, "PLUGIN_DIR", copy)
    monkeypatch.setattr(wheelhouse_module, "REQUIREMENTS", copy / REQUIREMENTS.name)
    return copy


def test_the_pins_are_exact_and_inside_the_plugins_ranges() -> None:
    declared = {
        canonicalize_name(r.name): r.specifier
        for r in map(Requirement, tomllib.loads((PLUGIN_DIR / "pyproject.toml").read_text())["project"]["dependencies"])
    }
    pinned = pins(REQUIREMENTS)
    assert set(declared) <= set(pinned)
    for name, specifier in declared.items():
        assert specifier.contains(pinned[name]), f"{name}=={pinned[name]} is outside {specifier}"


def test_the_digest_follows_the_python_version() -> None:
    assert inputs_digest("3.13") == inputs_digest("3.13")
    assert inputs_digest("3.13") != inputs_digest("3.12")
    assert len(inputs_digest("3.13")) == 16


def test_the_digest_follows_the_pins_and_the_sources(plugin_copy: Path) -> None:
    before = inputs_digest("3.13")
    requirements = plugin_copy / REQUIREMENTS.name
    requirements.write_text(requirements.read_text().replace("grpcio==", "grpcio==0.0.0\n# was "))
    after_pins = inputs_digest("3.13")
    assert after_pins != before
    (plugin_copy / "numa_align" / "cli.py").write_text("# changed\n")
    assert inputs_digest("3.13") not in (before, after_pins)


def test_a_real_wheelhouse_holds_numa_align_and_exactly_the_pins(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    built = wheelhouse("3.13", tmp_path)
    assert built == tmp_path / f"numa-align-py3.13-{inputs_digest('3.13')}"
    wheels = {}
    for path in built.iterdir():
        name, version, _, tags = parse_wheel_filename(path.name)
        assert tags & CP313, f"{path.name} does not install on CPython 3.13 manylinux x86_64"
        wheels[name] = str(version)
    assert wheels.pop("numa-align") == "0.1.0"
    assert wheels == pins(REQUIREMENTS)
    assert sorted(p.name for p in tmp_path.iterdir()) == [built.name, f"{built.name}.lock"]  # no .build left

    def no_pip(args: list[str], what: str) -> None:
        raise AssertionError(f"pip ran again for the {what}")

    monkeypatch.setattr(wheelhouse_module, "_pip", no_pip)
    assert wheelhouse("3.13", tmp_path) == built


def test_a_pin_pypi_lacks_fails_naming_the_step(plugin_copy: Path, tmp_path: Path) -> None:
    requirements = plugin_copy / REQUIREMENTS.name
    requirements.write_text("grpcio==0.0.0\n")
    cache = tmp_path / "cache"
    with pytest.raises(WheelhouseError, match=r"numa-align dependency wheels: pip download failed .*grpcio==0\.0\.0"):
        wheelhouse("3.13", cache)
    assert not (cache / f"numa-align-py3.13-{inputs_digest('3.13')}").exists()
