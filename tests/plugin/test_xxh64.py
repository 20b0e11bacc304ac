"""The pure-Python XXH64 against published and cross-checked vectors, in one piece and streamed."""

from __future__ import annotations

import pytest
from numa_align.xxh64 import XXH64, xxh64

SANITY_PRIME32 = 2654435761
SANITY_PRIME64 = 11400714785074694797


def sanity_buffer(length: int) -> bytes:
    """xxHash's own test buffer (Cyan4973/xxHash, xxhsum.c BMK_sanityCheck): the top byte of a 64-bit
    generator that starts at PRIME32 and is multiplied by PRIME64 after every byte."""
    generator, out = SANITY_PRIME32, bytearray()
    for _ in range(length):
        out.append(generator >> 56)
        generator = (generator * SANITY_PRIME64) & (2**64 - 1)
    return bytes(out)


def pattern(length: int) -> bytes:
    return bytes((i * 7 + 3) % 251 for i in range(length))


@pytest.mark.parametrize(("data", "expected"), [
    (b"", 0xEF46DB3751D8E999),
    (b"a", 0xD24EC4F1A98C6E5B),
    (b"abc", 0x44BC2CF5AD770999),
])
def test_short_strings(data: bytes, expected: int) -> None:
    assert xxh64(data) == expected


# Published by xxHash itself: xxhsum.c BMK_sanityCheck, BMK_testXXH64 rows (seed 0 and PRIME32).
@pytest.mark.parametrize(("length", "seed", "expected"), [
    (0, 0, 0xEF46DB3751D8E999),
    (0, SANITY_PRIME32, 0xAC75FDA2929B17EF),
    (1, 0, 0xE934A84ADB052768),
    (1, SANITY_PRIME32, 0x5014607643A9B4C3),
    (4, 0, 0x9136A0DCA57457EE),
    (14, 0, 0x8282DCC4994E35C8),
    (14, SANITY_PRIME32, 0xC3BD6BF63DEB6DF0),
    (222, 0, 0xB641AE8CB691C174),
    (222, SANITY_PRIME32, 0x20CB8AB7AE10C14A),
])
def test_xxhash_sanity_vectors(length: int, seed: int, expected: int) -> None:
    assert xxh64(sanity_buffer(length), seed) == expected


# Around the 32-byte stripe boundary, with a full 64-bit seed: the same value from python-xxhash 4.1.0
# (the reference C library) and from github.com/OneOfOne/xxhash v1.2.8, the Go package podfingerprint uses.
@pytest.mark.parametrize(("length", "seed", "expected"), [
    (31, 0, 0xA2AA5F33CC4A6119),
    (32, 0, 0x23C3C17EF790FD97),
    (32, 1, 0x7421B79A02B42132),
    (33, 0, 0x50A7CFC7BA588784),
    (33, 2**64 - 1, 0xDBBAC9766BB3ADF7),
    (63, 1, 0x0C94F8B81B79534C),
    (64, 0, 0x2CD990A1BEED6894),
    (64, 2**64 - 1, 0xEB79AD1AD53520CB),
    (100, 0, 0x778E26DF8290F456),
    (1000, 1, 0x37EDEC0234D588FD),
    (1000, 2**64 - 1, 0x41FA99962F100C5A),
])
def test_four_lane_loop_and_tails(length: int, seed: int, expected: int) -> None:
    assert xxh64(pattern(length), seed) == expected


@pytest.mark.parametrize("piece", [1, 3, 8, 31, 32, 33, 100])
def test_streaming_in_any_pieces_equals_one_shot(piece: int) -> None:
    data = sanity_buffer(222)
    hasher = XXH64(seed=SANITY_PRIME32)
    for start in range(0, len(data), piece):
        hasher.update(data[start:start + piece])
    assert hasher.intdigest() == 0x20CB8AB7AE10C14A


def test_digest_can_be_read_midway_and_input_continues() -> None:
    hasher = XXH64(b"a")
    assert hasher.intdigest() == 0xD24EC4F1A98C6E5B
    assert hasher.update(b"bc").intdigest() == 0x44BC2CF5AD770999


def test_eight_byte_writes_as_the_go_fingerprint_streams_them() -> None:
    data = pattern(96)
    hasher = XXH64()
    for start in range(0, 96, 8):
        hasher.update(memoryview(data)[start:start + 8])
    assert hasher.intdigest() == xxh64(bytearray(data)) == 0x82AFD80D820311F8  # same from OneOfOne's New64


def test_canonical_digest_is_big_endian_and_hex_is_zero_padded() -> None:
    hasher = XXH64(pattern(63), seed=1)  # 0x0c94f8b81b79534c: a leading zero digit
    assert hasher.digest() == bytes.fromhex("0c94f8b81b79534c")
    assert hasher.hexdigest() == "0c94f8b81b79534c"


@pytest.mark.parametrize("seed", [-1, 2**64, 1.0, True])
def test_seed_must_be_an_unsigned_64_bit_integer(seed: object) -> None:
    with pytest.raises(ValueError, match="seed"):
        XXH64(b"", seed)  # type: ignore[arg-type]


def test_text_must_be_encoded_first() -> None:
    with pytest.raises(TypeError, match="encode"):
        xxh64("abc")  # type: ignore[arg-type]
