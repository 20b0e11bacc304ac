"""XXH64, the 64-bit xxHash, in pure Python: the hash behind the scheduler's pod-set fingerprint.

Written from the algorithm's public definition (xxHash specification, "XXH64 algorithm description") so the
plugin needs no compiled dependency on the node. Digests are plain integers; `digest()` gives the canonical
big-endian bytes and `hexdigest()` 16 zero-padded lowercase hex digits, as the reference library prints them.
"""

from __future__ import annotations

import struct

MASK64 = (1 << 64) - 1
PRIME64_1 = 0x9E3779B185EBCA87
PRIME64_2 = 0xC2B2AE3D27D4EB4F
PRIME64_3 = 0x165667B19E3779F9
PRIME64_4 = 0x85EBCA77C2B2AE63
PRIME64_5 = 0x27D4EB2F165667C5
STRIPE = 32
"""Bytes consumed per round by the four accumulators (4 lanes of 8 bytes)."""

_STRIPE_LANES = struct.Struct("<4Q")
_LANE64 = struct.Struct("<Q")
_LANE32 = struct.Struct("<I")


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & MASK64


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * PRIME64_2) & MASK64
    return (_rotl(acc, 31) * PRIME64_1) & MASK64


def _merge(acc: int, value: int) -> int:
    acc ^= _round(0, value)
    return (acc * PRIME64_1 + PRIME64_4) & MASK64


class XXH64:
    """Streaming XXH64: feeding the input in any number of pieces gives the digest of their concatenation."""

    def __init__(self, data: bytes | bytearray | memoryview = b"", seed: int = 0) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MASK64:
            raise ValueError(f"XXH64 seed must be an integer in [0, 2**64), got {seed!r}")
        self.seed = seed
        self._acc = (
            (seed + PRIME64_1 + PRIME64_2) & MASK64,
            (seed + PRIME64_2) & MASK64,
            seed,
            (seed - PRIME64_1) & MASK64,
        )
        self._pending = b""
        self._length = 0
        self.update(data)

    def update(self, data: bytes | bytearray | memoryview) -> XXH64:
        """Add bytes; whole 32-byte stripes go through the accumulators, the rest waits for more input."""
        if isinstance(data, str):
            raise TypeError("XXH64 hashes bytes; encode the str first")
        chunk = memoryview(data).cast("B").tobytes()
        self._length += len(chunk)
        buffer = self._pending + chunk
        whole = len(buffer) - len(buffer) % STRIPE
        if whole:
            a1, a2, a3, a4 = self._acc
            for offset in range(0, whole, STRIPE):
                l1, l2, l3, l4 = _STRIPE_LANES.unpack_from(buffer, offset)
                a1, a2, a3, a4 = _round(a1, l1), _round(a2, l2), _round(a3, l3), _round(a4, l4)
            self._acc = (a1, a2, a3, a4)
        self._pending = buffer[whole:]
        return self

    def intdigest(self) -> int:
        """The hash of everything added so far; the state is left as is, so more input may follow."""
        if self._length >= STRIPE:
            a1, a2, a3, a4 = self._acc
            acc = (_rotl(a1, 1) + _rotl(a2, 7) + _rotl(a3, 12) + _rotl(a4, 18)) & MASK64
            for value in self._acc:
                acc = _merge(acc, value)
        else:
            acc = (self.seed + PRIME64_5) & MASK64
        acc = (acc + self._length) & MASK64
        tail, offset = self._pending, 0
        while offset + 8 <= len(tail):
            acc ^= _round(0, _LANE64.unpack_from(tail, offset)[0])
            acc = (_rotl(acc, 27) * PRIME64_1 + PRIME64_4) & MASK64
            offset += 8
        if offset + 4 <= len(tail):
            acc ^= (_LANE32.unpack_from(tail, offset)[0] * PRIME64_1) & MASK64
            acc = (_rotl(acc, 23) * PRIME64_2 + PRIME64_3) & MASK64
            offset += 4
        for byte in tail[offset:]:
            acc ^= (byte * PRIME64_5) & MASK64
            acc = (_rotl(acc, 11) * PRIME64_1) & MASK64
        return _avalanche(acc)

    def digest(self) -> bytes:
        """The canonical (big-endian) 8 bytes, as XXH64_canonicalFromHash and Go's hash.Hash64.Sum write them."""
        return self.intdigest().to_bytes(8, "big")

    def hexdigest(self) -> str:
        return f"{self.intdigest():016x}"


def _avalanche(acc: int) -> int:
    acc ^= acc >> 33
    acc = (acc * PRIME64_2) & MASK64
    acc ^= acc >> 29
    acc = (acc * PRIME64_3) & MASK64
    return acc ^ (acc >> 32)


def xxh64(data: bytes | bytearray | memoryview, seed: int = 0) -> int:
    """XXH64 of `data` with `seed`, as an unsigned 64-bit integer."""
    return XXH64(data, seed).intdigest()
