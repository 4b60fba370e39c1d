"""A vllm-ascend sdist whose build behaves like the real one where it matters to the installer.

Its in-tree PEP 517 backend compiles N stages with ninja-style `[n/m]` lines (skipping stages whose
objects exist: incremental), fails unless `decorator` imports and ASCEND_HOME_PATH is set, fails like
CMake unless torch is the row's version, fails with the TBE compiler's 'Another process is using this
dir' when a kernel_meta.lock holds a foreign pid, and produces an importable `vllm_ascend`.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path
from typing import Iterable

from ascend_setup.simulate.dists import WHEEL_WRITER, metadata_text

BACKEND = r'''
import importlib.metadata as md, os, sys, time
from pathlib import Path

from _wheel_writer import write_wheel

HERE = Path(__file__).resolve().parent
NAME, VERSION = "vllm_ascend", open(HERE / "VERSION").read().strip()
STAGES = int(os.environ.get("STUB_BUILD_STAGES", "6"))
SECONDS = float(os.environ.get("STUB_STAGE_SECONDS", "0.3"))
TORCH = "2.10.0"


def chatter(n):
    for i in range(n):
        print(f"-- [cmake] checking feature {i}: ok (this is the kind of line that buries the real error)")


def fail(*lines):
    chatter(200)
    for line in lines:
        print(line)
    print("FAILED: CMakeFiles/vllm_ascend_C.dir/all")
    print("ninja: build stopped: subcommand failed.")
    chatter(50)
    sys.stdout.flush()
    raise SystemExit(1)


def get_requires_for_build_wheel(config_settings=None):
    return []


def _dist_info(target):
    info = Path(target) / f"{NAME}-{VERSION}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text((HERE / "PKG-INFO").read_text())
    return info.name


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _dist_info(metadata_directory)


def _compile():
    chatter(30)
    try:
        import decorator  # noqa: F401  (CANN's operator compiler imports it)
    except ModuleNotFoundError as exc:
        fail("Traceback (most recent call last):", '  File "tbe/common/utils.py", line 21, in <module>',
             f"ModuleNotFoundError: {exc}")
    if not os.environ.get("ASCEND_HOME_PATH"):
        fail("CMake Error: ASCEND_HOME_PATH is not set; source CANN's set_env.sh")
    try:
        torch = md.version("torch")
    except md.PackageNotFoundError:
        torch = "none"
    if torch.split("+")[0] != TORCH:  # CMake's Torch_VERSION has no local part (+cpu)
        fail("CMake Error at CMakeLists.txt:28 (message):", f"  Expected PyTorch version {TORCH}, found {torch}")
    soc = os.environ.get("SOC_VERSION") or fail("CMake Error: SOC_VERSION is not set")
    build = HERE / "build"
    meta = build / "kernel_meta"
    meta.mkdir(parents=True, exist_ok=True)
    lock = meta / "kernel_meta.lock"
    if lock.exists() and lock.read_text().strip() != str(os.getpid()):
        fail(f"RuntimeError: Another process is using this dir: {meta}")
    lock.write_text(str(os.getpid()))
    todo = [i for i in range(1, STAGES + 1) if not (build / f"op_{i}.o").exists()]
    for n, i in enumerate(todo, 1):
        print(f"[{n}/{len(todo)}] Building CXX object op_{i}.o (SOC {soc}, MAX_JOBS {os.environ.get('MAX_JOBS')})",
              flush=True)
        chatter(20)
        time.sleep(SECONDS)
        tmp = build / f"op_{i}.tmp"
        tmp.write_text(f"object {i} for {soc}\n")
        os.replace(tmp, build / f"op_{i}.o")
        with open(build / "compiled.log", "a") as handle:
            handle.write(f"{i}\n")
            handle.flush()
            os.fsync(handle.fileno())
    lock.unlink()
    return soc


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    soc = _compile()
    files = {f"{NAME}/__init__.py": (HERE / NAME / "__init__.py").read_bytes(),
             f"{NAME}/_build_info.py": f"__soc_version__ = {soc!r}\n".encode()}
    return write_wheel(wheel_directory, NAME, VERSION, (HERE / "PKG-INFO").read_bytes(), files)
'''

PYPROJECT = """[build-system]
requires = []
build-backend = "_stub_backend"
backend-path = ["."]
"""


def build_stub_plugin_sdist(out_dir: Path, version: str, requires: Iterable[str], padding_bytes: int = 0) -> Path:
    """vllm_ascend-<version>.tar.gz; `padding_bytes` of incompressible data make downloads take time."""
    out_dir.mkdir(parents=True, exist_ok=True)
    base = f"vllm_ascend-{version}"
    members = {
        "PKG-INFO": metadata_text("vllm-ascend", version, requires, ">=3.10").encode(),
        "pyproject.toml": PYPROJECT.encode(),
        "_stub_backend.py": BACKEND.encode(),
        "_wheel_writer.py": WHEEL_WRITER.encode(),
        "VERSION": version.encode(),
        "vllm_ascend/__init__.py": f"__version__ = {version!r}\n".encode(),
        "vllm_ascend/worker/block_table.py": b"# a file whose name contains 'lock'\n",
        "csrc/transpose_kv_cache_by_block.cpp": b"// another one\n",
    }
    if padding_bytes:
        members["csrc/kernels.bin"] = os.urandom(padding_bytes)
    path = out_dir / f"{base}.tar.gz"
    with tarfile.open(path, "w:gz", compresslevel=1) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(f"{base}/{name}")
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
    return path
