from fractions import Fraction

import pytest

from numalab.model.errors import ValidationError
from numalab.model.quantity import (
    format_bytes,
    format_millis,
    parse_bytes,
    parse_cpu_millis,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("512Mi", 512 * 2**20),
        ("1Gi", 2**30),
        ("1.5Gi", 3 * 2**29),
        ("100M", 100 * 10**6),
        ("1e3", 1000),
        ("2", 2),
        (42, 42),
        ("500m", Fraction(1, 2)),
        (".5Ki", 512),
    ],
)
def test_parse_quantity(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "1 Gi", "1GB", "Gi", "1.2.3", "abc", True])
def test_parse_quantity_rejects_garbage_naming_the_field(text):
    with pytest.raises(ValidationError) as err:
        parse_quantity(text, "settings.kube-reserved.memory")
    assert err.value.field == "settings.kube-reserved.memory"


def test_bytes_are_exact_and_print_with_the_largest_exact_suffix():
    total = parse_bytes("4Gi") + parse_bytes("1Gi") + parse_bytes("100Mi")
    assert format_bytes(total) == "5220Mi"
    assert format_bytes(2**30) == "1Gi"
    assert format_bytes(1536 * 2**20) == "1536Mi"
    assert format_bytes(1000) == "1000"
    assert format_bytes(0) == "0"


def test_fractional_bytes_and_negative_memory_are_refused():
    with pytest.raises(ValidationError, match="whole number of bytes"):
        parse_bytes("0.5")
    with pytest.raises(ValidationError, match="negative"):
        parse_bytes("-1Mi")


def test_cpu_millis():
    assert parse_cpu_millis("500m") == 500
    assert parse_cpu_millis("1.5") == 1500
    assert parse_cpu_millis(2) == 2000
    assert format_millis(1500) == "1500m"
    assert format_millis(2000) == "2"
    with pytest.raises(ValidationError, match="finer than 1m"):
        parse_cpu_millis("0.0001")
