"""Shaped mirrors on loopback, each a real simple index serving the row's pinned files."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

from ascend_setup.simulate.dists import build_wheel
from ascend_setup.simulate.index_server import Behaviour, LocalIndex

SAMPLE_BYTES = 4 * 1024 * 1024

SHAPES: Dict[str, Behaviour] = {
    "fast": Behaviour(),
    "medium": Behaviour(line_bytes_per_second=6_000_000),  # the mirror's whole rate, however many connections
    "crawler": Behaviour(line_bytes_per_second=300_000),
    "stall": Behaviour(stall_after_headers=True),
    "404": Behaviour(file_status=404),
    "stale": Behaviour(),
    "garbage": Behaviour(garbage=True),
}


def build_files(root: Path, pins: Dict[str, str], arch: str, stale: bool = False) -> Path:
    """The gated pins as wheels for `arch`; torch-npu carries the bulk (the sample every mirror serves: on
    x86_64 the torch family comes from the PyTorch CPU index, not from a PyPI mirror)."""
    out = root / ("stale" if stale else "fresh")
    for name, version in pins.items():
        if stale and name == "torch-npu":
            version = "2.10.0.post2"  # this mirror stopped syncing before post4
        files = {f"{name.replace('-', '_')}/__init__.py": ""}
        if name == "torch-npu":
            files["torch_npu/_blob.bin"] = os.urandom(SAMPLE_BYTES)  # incompressible: the wheel stays big
        build_wheel(out, name, version, tag=f"cp311-cp311-manylinux_2_28_{arch}", files=files)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Farm:
    servers: Dict[str, LocalIndex]
    refused: str

    def url(self, shape: str) -> str:
        return self.refused if shape == "refused" else self.servers[shape].url

    def urls(self) -> List[str]:
        return [self.url(s) for s in [*SHAPES, "refused"]]

    def shape_of(self, url: str) -> str:
        return next(s for s in [*SHAPES, "refused"] if self.url(s) == url)

    def close(self) -> None:
        for server in self.servers.values():
            server.close()


def build_farm(root: Path, pins: Dict[str, str], arch: str) -> Farm:
    fresh = build_files(root, pins, arch)
    stale = build_files(root, pins, arch, stale=True)
    servers = {}
    for shape, behaviour in SHAPES.items():
        server = LocalIndex(behaviour)
        server.add_dir(stale if shape == "stale" else fresh)
        servers[shape] = server
    return Farm(servers=servers, refused=f"http://127.0.0.1:{free_port()}/simple/")
