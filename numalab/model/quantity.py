"""Kubernetes resource quantities with exact arithmetic.

The kubelet compares reserved-memory sums with Node Allocatable to the byte, so every sum here is done
on integers (Fractions while parsing), never floats.
"""

from __future__ import annotations

import re
from fractions import Fraction

from numalab.model.errors import ValidationError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$")


def parse_quantity(text: str | int, field: str = "quantity") -> Fraction:
    """Parse "1.5Gi", "500m", "1e3", 42 into an exact number (bytes for memory, cores for cpu)."""
    if isinstance(text, bool):
        raise ValidationError(field, f"expected a quantity like 512Mi or 500m, got {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    match = _QUANTITY.match(str(text).strip())
    if not match:
        raise ValidationError(field, f"{text!r} is not a Kubernetes quantity (examples: 512Mi, 1Gi, 500m, 2)")
    number, exponent, suffix = match.groups()
    value = Fraction(number)
    if exponent:
        value *= Fraction(10) ** int(exponent[1:])
    elif suffix:
        value *= _BINARY.get(suffix) or _DECIMAL[suffix]
    return value


def parse_bytes(text: str | int, field: str = "memory") -> int:
    """A memory quantity in whole bytes; a fractional byte count is refused (the kubelet would round)."""
    value = parse_quantity(text, field)
    if value < 0:
        raise ValidationError(field, f"{text!r} is negative")
    if value.denominator != 1:
        raise ValidationError(field, f"{text!r} is not a whole number of bytes")
    return int(value)


def format_bytes(value: int) -> str:
    """The largest binary suffix that prints the value exactly: 5473566720 -> "5220Mi"."""
    if value == 0:
        return "0"
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _BINARY[suffix]
        if value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value)


def parse_cpu_millis(text: str | int, field: str = "cpu") -> int:
    """A CPU quantity in millicores: "500m" -> 500, "2" -> 2000; finer than 1m is refused."""
    value = parse_quantity(text, field) * 1000
    if value < 0:
        raise ValidationError(field, f"{text!r} is negative")
    if value.denominator != 1:
        raise ValidationError(field, f"{text!r} is finer than 1m")
    return int(value)


def format_millis(millis: int) -> str:
    """500 -> "500m", 2000 -> "2"."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"
