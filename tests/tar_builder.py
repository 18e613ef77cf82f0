"""Raw tar blocks for hostile-archive tests: headers written byte by byte, so a test can say
exactly what `tarfile` would never write (negative sizes, bad checksums, chained headers)."""

from __future__ import annotations

import gzip
import json

BLOCK = 512
END = bytes(2 * BLOCK)
MANIFEST = {"schema": "ascend-snapshot/1.1", "created_at": "2025-06-01T12:00:00Z",
            "hostname": "h", "root": "/", "tool_version": "t"}


def header(name: bytes, size: int = 0, kind: bytes = b"0", size_field: bytes | None = None,
           checksum: bool = True) -> bytes:
    block = bytearray(BLOCK)
    block[0:len(name[:100])] = name[:100]
    block[100:108] = b"0000644\x00"
    block[108:116] = b"0000000\x00"
    block[116:124] = b"0000000\x00"
    block[124:136] = size_field if size_field is not None else b"%011o\x00" % size
    block[136:148] = b"00000000000\x00"
    block[156:157] = kind
    block[257:265] = b"ustar\x0000"
    block[148:156] = b" " * 8
    if checksum:
        block[148:156] = b"%06o\x00 " % sum(block)
    return bytes(block)


def pad(data: bytes) -> bytes:
    return data + bytes(-len(data) % BLOCK)


def member(name: str, data: bytes) -> bytes:
    return header(name.encode(), len(data)) + pad(data)


def pax(records: bytes) -> bytes:
    return header(b"././@PaxHeader", len(records), b"x") + pad(records)


def pax_record(key: str, value: str) -> bytes:
    body = f" {key}={value}\n".encode()
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length += 1
    return str(length).encode() + body


def manifest_member() -> bytes:
    return member("snap/manifest.json", json.dumps(MANIFEST).encode())


def gz(*parts: bytes) -> bytes:
    return gzip.compress(b"".join(parts), compresslevel=9, mtime=0)
