"""Protobuf wire format for tests that write fields today's protos no longer have (unknown fields)."""

from __future__ import annotations


def varint(n: int) -> bytes:
    """``n`` as a base-128 varint (a negative ``n`` as its 64-bit two's complement, as protobuf does)."""
    n &= (1 << 64) - 1
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(number: int, payload: bytes | int) -> bytes:
    """Field ``number``: a varint for an int, else length-delimited bytes."""
    if isinstance(payload, int):
        return varint(number << 3) + varint(payload)
    return varint(number << 3 | 2) + varint(len(payload)) + payload
