"""A safetensors header, read and checked against the file it came from (local or remote alike).

The format: 8 bytes little-endian header length N, N bytes of JSON {tensor: {dtype, shape, data_offsets}},
then the data. A header is believed only when it agrees with itself and with the file's size: a 100-byte
file that claims 32 GB, offsets past the end of the data, reversed or overlapping offsets, a zero shape or an
unknown dtype is bad input, not a figure.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any, Dict

from ascend_setup.errors import BadInput

#: The safetensors spec's limit on a header (and so on what we read before the data).
MAX_HEADER = 100 * 1024 * 1024
#: Bytes per element of every dtype the format defines (sub-byte dtypes are refused: unknown here).
DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "F64": 8,
    "I64": 8,
    "U64": 8,
}


def header_length(name: str, first8: bytes, file_size: int) -> int:
    """N from the first 8 bytes; it must leave room in the file (and stay under the spec's limit)."""
    if len(first8) < 8:
        raise BadInput(f"{name}: not a safetensors file ({len(first8)} bytes, shorter than its length field)")
    length: int = struct.unpack("<Q", first8[:8])[0]
    if length == 0 or length > MAX_HEADER or 8 + length > file_size:
        raise BadInput(f"{name}: not a safetensors file (a header of {length} bytes in a file of {file_size})")
    return length


def parse_header(name: str, blob: bytes, file_size: int) -> Dict[str, Any]:
    """The header's tensors, each checked: known dtype, positive shape, offsets that match the shape and lie
    inside the file's data section."""
    try:
        header = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BadInput(f"{name}: its safetensors header is not JSON ({exc.__class__.__name__})") from None
    if not isinstance(header, dict):
        raise BadInput(f"{name}: its safetensors header is not a JSON object")
    data_size = file_size - 8 - len(blob)
    for tensor, entry in header.items():
        if tensor == "__metadata__":
            continue
        _check_tensor(name, tensor, entry, data_size)
    _check_disjoint(name, header)
    return header


def _check_disjoint(name: str, header: Dict[str, Any]) -> None:
    """No two tensors share a byte: a header whose tensors overlap describes no file (a tensor counted twice
    would make fit's figure wrong, not merely large)."""
    spans = sorted(
        (entry["data_offsets"][0], entry["data_offsets"][1], tensor)
        for tensor, entry in header.items()
        if tensor != "__metadata__"
    )
    for (_, end, first), (start, _, second) in zip(spans, spans[1:]):
        if start < end:
            raise BadInput(
                f"{name}: tensors {first[:80]!r} and {second[:80]!r} overlap (bytes {start}-{end} of the "
                "data are claimed by both)",
                hint="the header does not describe a safetensors file; fetch the shard again",
            )


def _check_tensor(name: str, tensor: str, entry: Any, data_size: int) -> None:
    where = f"{name}: tensor {tensor[:80]!r}"
    if not isinstance(entry, dict):
        raise BadInput(f"{where} is not an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in DTYPE_BYTES:
        raise BadInput(f"{where} has an unknown dtype {str(dtype)[:20]!r}")
    if not isinstance(shape, list) or not all(type(d) is int and d > 0 for d in shape):
        raise BadInput(f"{where} has a shape that is not a list of positive integers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)):
        raise BadInput(f"{where} has no [start, end] data_offsets")
    start, end = offsets
    if not 0 <= start <= end <= data_size:
        raise BadInput(
            f"{where}: offsets {start}-{end} do not lie in the file's {data_size} data bytes",
            hint="the header does not describe this file (a truncated or partial download?)",
        )
    if end - start != math.prod(shape) * DTYPE_BYTES[dtype]:
        raise BadInput(f"{where}: {end - start} bytes do not hold shape {shape[:8]} of {dtype}")
