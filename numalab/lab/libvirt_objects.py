"""Finding libvirt objects and telling which lab owns them: shared by every module that changes them.

Every object numa-lab creates carries the lab's name in its `<metadata>`; only such objects are changed or
removed. libvirt prints every error to stderr by default; once this module is imported they arrive only as
exceptions.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import TypeVar

import libvirt

NAMESPACE = "urn:numa-lab:lab"

T = TypeVar("T")


def _quiet_libvirt(_context: object, _error: object) -> None:
    """libvirt prints every error to stderr by default; here they arrive as exceptions instead."""


libvirt.registerErrorHandler(_quiet_libvirt, None)


def lookup_or_none(find: Callable[[str], T], name: str) -> T | None:
    """`find(name)` (any virConnect/virStoragePool lookup), or None when no such object exists."""
    try:
        return find(name)
    except libvirt.libvirtError as exc:
        if exc.get_error_code() in (
            libvirt.VIR_ERR_NO_DOMAIN,
            libvirt.VIR_ERR_NO_NETWORK,
            libvirt.VIR_ERR_NO_STORAGE_POOL,
            libvirt.VIR_ERR_NO_STORAGE_VOL,
        ):
            return None
        raise


def lab_of_xml(xml: str) -> str | None:
    """The lab name in an object's <metadata>, or None for objects numa-lab did not create."""
    root = ET.fromstring(xml)
    element = root.find(f"./metadata/{{{NAMESPACE}}}lab")
    return element.get("name") if element is not None else None
