"""The floor benchmark's world: the simulated host's indexes shaped like a real mirror, and their wheels grown to
the real closure's sizes (benchmarks/data/closure-9.1.0.json) with an incompressible payload.

The simulated stack keeps what makes the install work (its stubs' code, names and requirements); every wheel
of it that this machine installs is padded to the size of the real file of the same package, and the real
closure's packages the simulated one lacks are added as wheels of their real version and size, required by one
plain stub, so that the install downloads as many files, and as many bytes, as the real one would.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Set

from packaging.tags import sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename

from ascend_setup.simulate.dists import build_wheel
from ascend_setup.simulate.index_server import Behaviour, LocalIndex, _Line

DATA = Path(__file__).resolve().parent / "data" / "closure-9.1.0.json"

#: A mirror 100 ms away (every page and every file costs a round trip before its first byte) that caps each
#: connection at 2.5 MB/s on a 10 MB/s line: one connection gets a quarter of the line, four fill it.
LATENCY = 0.1
PER_CONNECTION = 2_500_000
LINE = 10_000_000
#: The plain stub that carries the real closure's extra packages as its requirements (in both closures, no code).
CARRIER = "einops"


def shape() -> Behaviour:
    return Behaviour(
        bytes_per_second=PER_CONNECTION,
        line_bytes_per_second=LINE,
        page_delay=LATENCY / 2,
        first_byte_delay=LATENCY / 2,
    )


def shape_indexes(indexes: List[LocalIndex]) -> None:
    """Every index of the world shaped alike, all behind one line (the host's downlink they share)."""
    line = _Line(LINE)
    for index in indexes:
        index.behaviour = shape()
        index.line = line


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def pad_wheel(path: Path, size: int) -> None:
    """Grow the wheel at `path` to about `size` bytes with a random (incompressible) payload in its dist-info,
    listed in its RECORD, so that it downloads and unpacks at the cost of a real wheel of that size."""
    grow = size - path.stat().st_size - 512  # the payload's zip headers and its RECORD line
    if grow <= 0:
        return
    payload = os.urandom(grow)
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(path) as old, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as new:
        record = next(n for n in old.namelist() if n.endswith(".dist-info/RECORD"))
        blob = record.rsplit("/", 1)[0] + "/FLOOR_PAYLOAD"
        for info in old.infolist():
            if info.filename != record:
                new.writestr(info, old.read(info))
        new.writestr(zipfile.ZipInfo(blob), payload, compress_type=zipfile.ZIP_STORED)
        lines = old.read(record).decode().rstrip("\n").split("\n")
        lines.insert(-1, f"{blob},{_record_hash(payload)},{len(payload)}")
        new.writestr(zipfile.ZipInfo(record), ("\n".join(lines) + "\n").encode())
    os.replace(tmp, path)


@dataclass
class Fitted:
    """What the world was fitted with, for the benchmark's output."""

    padded: List[str] = field(default_factory=list)  # packages whose wheel now has its real size
    added: List[str] = field(default_factory=list)  # packages of the real closure the simulated one lacked
    kept_small: List[str] = field(default_factory=list)  # in the install, yet no real size (sdists, stubs)
    stand_ins: List[dict] = field(default_factory=list)  # real packages sized by a stand-in (unreachable index)
    left_out: List[dict] = field(default_factory=list)  # real packages with no size at all
    data: dict = field(default_factory=dict)


def load_sizes() -> dict:
    return json.loads(DATA.read_text())


def fit(directories: List[Path], indexes: List[LocalIndex], main: Path, scale: float, closure: Set[str]) -> Fitted:
    """Pad every wheel this machine would install to its real size (times `scale`), add the real closure's
    packages that the simulated one (`closure`: its names) lacks to `main`, required by CARRIER, and let the
    indexes serve the new files."""
    data = load_sizes()
    fitted = Fitted(data=data)
    real: Dict[str, dict] = {p["name"]: p for p in data["packages"] if p["kind"] == "wheel"}
    for missing in data["unreachable"]:
        if missing.get("size"):
            real[missing["name"]] = {**missing, "kind": "wheel"}
            fitted.stand_ins.append(missing)
        else:
            fitted.left_out.append(missing)
    here: Set = set(sys_tags())
    present: Set[str] = set()
    for directory in directories:
        for wheel in sorted(directory.glob("*.whl")):
            name, _, _, tags = parse_wheel_filename(wheel.name)
            present.add(str(name))
            if name in real and name in closure and tags & here:
                pad_wheel(wheel, int(real[name]["size"] * scale))
                fitted.padded.append(str(name))
    sdists = {canonicalize_name(p["name"]) for p in data["packages"] if p["kind"] != "wheel"}
    fitted.kept_small = sorted(sdists)
    extra = sorted(n for n in real if n not in closure)
    for name in extra:
        for old in main.glob(f"{name.replace('-', '_')}-*.whl"):  # a stub of it no one requires: the real one
            old.unlink()
        wheel = build_wheel(main, name, real[name]["version"])
        pad_wheel(wheel, int(real[name]["size"] * scale))
    fitted.added = extra
    carrier = next(main.glob(f"{CARRIER}-*.whl"))
    version = str(parse_wheel_filename(carrier.name)[1])
    carrier.unlink()
    build_wheel(main, CARRIER, version, requires=[f"{n}=={real[n]['version']}" for n in extra])
    for index, directory in zip(indexes, directories):
        index.add_dir(directory)  # (re-)reads every file's hash and size
    fitted.padded = sorted(set(fitted.padded))
    for index in indexes:
        for gone in [n for n, f in index.files.items() if not f.path.exists()]:
            del index.files[gone]
    return fitted


def lock_files(lock: Path) -> List[dict]:
    """The packages of an ascend-setup lock (its JSON header)."""
    for line in lock.read_text().splitlines():
        if line.startswith("# ascend-setup-lock: "):
            return json.loads(line[len("# ascend-setup-lock: ") :])["packages"]
    raise SystemExit(f"{lock} is not an ascend-setup lock")


def unpack_seconds(wheels: List[Path], into: Path) -> float:
    """The time to unpack `wheels` into `into` (every member read, inflated and written): the floor's local part."""
    start = time.perf_counter()
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(into / wheel.name)
    os.sync()  # what reached the page cache only is not unpacked yet on a slow disk
    return time.perf_counter() - start


def find(directories: List[Path], filename: str) -> Optional[Path]:
    return next((d / filename for d in directories if (d / filename).exists()), None)
