"""Fabricated dist-info directories in a real venv: what pip would leave behind, without pip."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import venv
from pathlib import Path
from typing import Dict, Iterable, Mapping, Optional, Union

from packaging.utils import canonicalize_name

from ascend_setup.matrix import load_matrix
from ascend_setup.simulate.dists import metadata_text
from ascend_setup.simulate.ecosystem import PLUGIN_REQUIRES, VLLM_REQUIRES, stub_versions
from ascend_setup.simulate.world import venv_python_for


def make_venv(path: Path, system_site_packages: bool = False) -> Path:
    """A venv of an interpreter in the 9.1.0 row's range: this one, or (when the tool runs on 3.8) the one the
    simulated installs' venvs use."""
    python = venv_python_for(load_matrix().rows["9.1.0"])
    if python == sys.executable:
        venv.create(path, with_pip=False, system_site_packages=system_site_packages)
    else:
        subprocess.run(
            [
                python,
                "-m",
                "venv",
                "--without-pip",
                str(path),
                *(["--system-site-packages"] if system_site_packages else []),
            ],
            check=True,
        )
    return path


def site_of(venv_path: Path) -> Path:
    return next((venv_path / "lib").glob("python3*/site-packages"))


def fake_install(
    venv_path: Path,
    name: str,
    version: str,
    *,
    requires: Iterable[str] = (),
    files: Optional[Mapping[str, Union[str, bytes]]] = None,
    tag: Optional[str] = "py3-none-any",
    installer: str = "pip",
    direct_url: Optional[dict] = None,
    dist_dir: Optional[str] = None,
) -> Path:
    """Write `<name>-<version>.dist-info` (METADATA, RECORD, INSTALLER, WHEEL) and the files it records."""
    site = site_of(venv_path)
    stem = canonicalize_name(name).replace("-", "_")
    info = site / (dist_dir or f"{stem}-{version}.dist-info")
    info.mkdir(parents=True)
    (info / "METADATA").write_text(metadata_text(name, version, requires))
    (info / "INSTALLER").write_text(installer + "\n")
    if tag:
        (info / "WHEEL").write_text(f"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: {tag}\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    files = files if files is not None else {f"{stem}/__init__.py": ""}
    for rel, text in files.items():
        target = site / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            target.write_bytes(text)
        else:
            target.write_text(text)
    record = [f"{rel},," for rel in files] + [f"{info.name}/{m},," for m in ("METADATA", "INSTALLER", "RECORD")]
    (info / "RECORD").write_text("\n".join(record) + "\n")
    return info


MATRIX = load_matrix()
ROW = MATRIX.rows["9.1.0"].for_arch(platform.machine())  # the row as this machine takes it (+cpu on x86_64)
VERSIONS = stub_versions(dict(ROW.packages), dict(ROW.cann_python_deps))
SPECIAL = {"vllm": VLLM_REQUIRES, "vllm-ascend": PLUGIN_REQUIRES}
TRITON_FILES = {"triton/__init__.py": "", "triton/language/core.py": ""}


def clean_venv(path: Path, skip=(), override: Optional[Dict[str, str]] = None) -> Path:
    """Everything the row and its requirements need, at versions that satisfy them."""
    make_venv(path)
    versions = dict(VERSIONS, **(override or {}))
    for name, version in sorted(versions.items()):
        if name in skip or (ROW.is_cuda_only(name) and name not in ROW.packages):
            continue
        files = TRITON_FILES if name == "triton-ascend" else None
        fake_install(path, name, version, requires=SPECIAL.get(name, ()), files=files)
    return path
