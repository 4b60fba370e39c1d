"""A vllm-ascend sdist whose build behaves like the real one where it matters to the installer.

Its in-tree PEP 517 backend shells out the way the real setup.py does: CANN's `bisheng` from PATH runs
the operator compiler with `python3` from PATH (which must import decorator, attrs and sympy), `cmake`
from PATH must be >= 3.26, and torch_npu is found with `python3 -m pip show torch-npu`: run outside the
venv, the build fails. It fails like CMake unless torch is the row's version and ASCEND_HOME_PATH is set,
and with the TBE compiler's 'Another process is using this dir' when a kernel_meta.lock holds a foreign
pid. It downloads mid-build each third-party archive its csrc/cmake files name that is not already in
place. It compiles N stages with Makefile-style `[ NN%]` lines (or Ninja's `[n/m]`), skipping stages
whose objects exist (incremental). It writes `_build_info.py` with the SOC's `__device_type__` as
upstream does, leaves the `.so` files in build/temp.* and packs build/lib as it finds it (so a reused
tree leaks), and with COMPILE_CUSTOM_KERNELS=0 "succeeds" with no `.so` at all.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path
from typing import Dict, Iterable, Optional, Sequence

from ascend_setup.matrix.soc import soc_table
from ascend_setup.simulate.dists import WHEEL_WRITER, metadata_text
from ascend_setup.simulate.native_stubs import plain_library
from ascend_setup.simulate.stub_plugin_config import FILES as CONFIG_FILES
from ascend_setup.simulate.third_party import StubArchive

BACKEND = r'''
import importlib.metadata as md, json, os, platform, re, shutil, subprocess, sys, time, urllib.request
from pathlib import Path

from _wheel_writer import write_wheel

HERE = Path(__file__).resolve().parent
NAME, VERSION = "vllm_ascend", open(HERE / "VERSION").read().strip()
STAGES = int(os.environ.get("STUB_BUILD_STAGES", "6"))
SECONDS = float(os.environ.get("STUB_STAGE_SECONDS", "0.3"))
GENERATOR = os.environ.get("STUB_BUILD_GENERATOR", "make")  # the top-level build uses Makefiles: [ NN%]
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


CMAKE_MIN = (3, 26)  # pyproject's build requirement: cmake>=3.26


def _device_type(soc):
    """setup.py's gen_build_info: the SOC's device type, or the AssertionError upstream raises. The table is
    the tool's own (data/soc_versions.yaml), written into the sdist."""
    table = json.loads((HERE / "_soc_table.json").read_text())
    found = table["socs"].get(soc) or next((d for part, d in table["contains"].items() if part in soc), None)
    if found is None:
        fail("AssertionError: Undefined soc_version: %s. Please file an issue to vllm-ascend." % soc)
    return found


def _operator_compiler():
    """build_aclnn.sh: ~/.gitconfig, bisheng from PATH; csrc's CMake takes `python3` from PATH as the
    operator compiler's Python (HI_PYTHON), and the compiler imports decorator, attrs, sympy with it."""
    with open(os.path.expanduser("~/.gitconfig"), "a") as handle:
        handle.write("[safe]\n\tdirectory = %s\n" % HERE)
    bisheng = shutil.which("bisheng")
    if not bisheng:
        fail("Error: bisheng compilation tool not found, Please check whether the cann package or environment "
             "variables are set.")
    python3 = shutil.which("python3") or fail("CMake Error: Can't find python3.")
    print("-- Found Python3: %s" % python3)
    proc = subprocess.run([bisheng, "-c", "op_kernel.cpp"], capture_output=True, text=True,
                          env=dict(os.environ, HI_PYTHON=python3))
    if proc.returncode != 0:
        fail(*(proc.stdout + proc.stderr).splitlines())


def _third_party():
    """What csrc's CMake does with each archive: use it when it is there, else download it (mid-build)."""
    for item in json.loads((HERE / "_stub_cmake.json").read_text()):
        if (HERE / "csrc" / item["found"]).exists():
            print("-- [ThirdPartyLib] %s found" % item["name"])
            continue
        print("-- Downloading %s" % item["url"])
        try:
            with urllib.request.urlopen(item["url"], timeout=10) as response:
                data = response.read()
        except OSError as exc:
            fail("CMake Error at cmake/third_party/%s:" % item["cmake"],
                 "  error: downloading '%s' failed" % item["url"], "  status_string: \"%s\"" % exc)
        pkg = HERE / "csrc" / "third_party" / "pkg"
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / item["name"]).write_bytes(data)
        with open(HERE / "csrc" / "third_party" / "fetched-during-build.log", "a") as handle:
            handle.write(item["url"] + "\n")


def _configure():
    """setup.py's cmake_build_ext.configure: `cmake` from PATH, torch_npu found by `python3 -m pip show`."""
    if not shutil.which("cmake"):
        fail("RuntimeError: Cannot find CMake executable: [Errno 2] No such file or directory: 'cmake'")
    words = subprocess.check_output(["cmake", "--version"], text=True).split()
    version = tuple(int(p) for p in words[2].split(".")[:2]) if len(words) > 2 else (0, 0)
    if version < CMAKE_MIN:
        fail("CMake Error: CMake %d.%d or higher is required.  You are running version %s" % (*CMAKE_MIN, words[2]))
    command = "python3 -m pip show torch-npu | grep '^Location:' | awk '{print $2}'"
    torch_npu = subprocess.check_output(command, shell=True).decode().strip() + "/torch_npu"
    print("TORCH_NPU_PATH is %s" % torch_npu)
    if not os.path.isdir(torch_npu):
        fail("CMake Error at CMakeLists.txt:96 (include_directories):",
             "  torch_npu headers not found under TORCH_NPU_PATH=%s" % torch_npu)


def _compile():
    if os.environ.get("COMPILE_CUSTOM_KERNELS", "1") == "0":
        print("COMPILE_CUSTOM_KERNELS=0: building no C++ extension")
        return None
    chatter(30)
    _operator_compiler()
    if not os.environ.get("ASCEND_HOME_PATH"):
        fail("CMake Error: ASCEND_HOME_PATH is not set; source CANN's set_env.sh")
    try:
        torch = md.version("torch")
    except md.PackageNotFoundError:
        torch = "none"
    if torch.split("+")[0] != TORCH:  # CMake's Torch_VERSION has no local part (+cpu)
        fail("CMake Error at CMakeLists.txt:28 (message):", f"  Expected PyTorch version {TORCH}, found {torch}")
    soc = os.environ.get("SOC_VERSION") or fail("CMake Error: SOC_VERSION is not set")
    _third_party()
    _configure()
    build = HERE / "build"
    meta = build / "kernel_meta"
    meta.mkdir(parents=True, exist_ok=True)
    lock = meta / "kernel_meta.lock"
    if lock.exists() and lock.read_text().strip() != str(os.getpid()):
        fail(f"RuntimeError: Another process is using this dir: {meta}")
    lock.write_text(str(os.getpid()))
    todo = [i for i in range(1, STAGES + 1) if not (build / f"op_{i}.o").exists()]
    for n, i in enumerate(todo, 1):
        percent = n * 100 // len(todo)
        line = (f"[{percent:3d}%] Building CXX object op_{i}.o" if GENERATOR == "make" else
                f"[{n}/{len(todo)}] Building CXX object op_{i}.o")
        print(f"{line} (SOC {soc}, MAX_JOBS {os.environ.get('MAX_JOBS')})", flush=True)
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
    tag = sys.implementation.cache_tag.replace("cpython-", "")
    temp = build / f"temp.linux-{platform.machine()}-cpython-{tag}"
    temp.mkdir(parents=True, exist_ok=True)
    # real shared objects, compiled when the sdist was made (_native/): the extension, the kernels, the op API
    extension = HERE / "_native" / "vllm_ascend_C.so"
    plain = HERE / "_native" / "plain.so"
    shutil.copyfile(extension if extension.exists() else plain,
                    temp / f"vllm_ascend_C.cpython-{tag}-{platform.machine()}-linux-gnu.so")
    if not re.fullmatch(r"ascend310p.*|ascend950.*", soc):
        shutil.copyfile(plain, temp / "libvllm_ascend_kernels.so")
    opapi = HERE / NAME / "_cann_ops_custom" / "vendors" / "custom_transformer" / "op_api" / "lib"
    opapi.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(plain, opapi / "libcust_opapi.so")
    return soc


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """setuptools' order: build_py (gen_build_info, then the package into build/lib), build_ext (every .so
    of build/temp.* and _cann_ops_custom copied into build/lib), then build/lib is packed as it is."""
    soc = os.environ.get("SOC_VERSION", "")
    device = _device_type(soc) if soc else None
    lib = HERE / "build" / "lib"
    if device:
        (HERE / NAME / "_build_info.py").write_text(f"# Auto-generated file\n__device_type__ = {device!r}\n")
    compiled = _compile()
    for path in sorted((HERE / NAME).rglob("*")):
        if path.is_file():
            target = lib / path.relative_to(HERE)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    if compiled:
        for so in sorted(HERE.glob("build/temp.*/*.so")):
            shutil.copyfile(so, lib / NAME / so.name)
    files = {str(p.relative_to(lib)): p.read_bytes() for p in sorted(lib.rglob("*")) if p.is_file()}
    return write_wheel(wheel_directory, NAME, VERSION, (HERE / "PKG-INFO").read_bytes(), files)
'''

PYPROJECT = """[build-system]
requires = []
build-backend = "_stub_backend"
backend-path = ["."]
"""


def build_stub_plugin_sdist(
    out_dir: Path,
    version: str,
    requires: Iterable[str],
    padding_bytes: int = 0,
    third_party: Sequence[StubArchive] = (),
    extension: Optional[bytes] = None,
) -> Path:
    """vllm_ascend-<version>.tar.gz; `padding_bytes` of incompressible data make downloads take time;
    `third_party`: the archives its csrc/cmake files name (and its build downloads when they are missing);
    `extension`: the vllm_ascend_C its build installs (native_stubs.plugin_extension), else one with no needs."""
    out_dir.mkdir(parents=True, exist_ok=True)
    base = f"vllm_ascend-{version}"
    members = {
        "PKG-INFO": metadata_text("vllm-ascend", version, requires, ">=3.10").encode(),
        "pyproject.toml": PYPROJECT.encode(),
        "_stub_backend.py": BACKEND.encode(),
        "_wheel_writer.py": WHEEL_WRITER.encode(),
        "VERSION": version.encode(),
        "_soc_table.json": json.dumps({"socs": soc_table().socs, "contains": soc_table().contains}).encode(),
        "vllm_ascend/__init__.py": f"__version__ = {version!r}\n".encode(),
        "vllm_ascend/worker/block_table.py": b"# a file whose name contains 'lock'\n",
        **{path: text.encode() for path, text in CONFIG_FILES.items()},
        "csrc/transpose_kv_cache_by_block.cpp": b"// another one\n",
        "_native/plain.so": plain_library(),
    }
    if extension is not None:
        members["_native/vllm_ascend_C.so"] = extension
    if padding_bytes:
        members["csrc/kernels.bin"] = os.urandom(padding_bytes)
    includes = "".join(f"include(cmake/third_party/{a.cmake_name})\n" for a in third_party)
    members["csrc/CMakeLists.txt"] = (
        "project(cann_ops-transformer)\nif (ENABLE_TEST)\n"
        "  include(cmake/third_party/gtest.cmake)\nendif()\n" + includes
    ).encode()
    for archive in third_party:
        members[f"csrc/cmake/third_party/{archive.cmake_name}"] = archive.cmake_text.encode()
    members["_stub_cmake.json"] = json.dumps(
        [{"name": a.name, "url": a.url, "found": a.found, "cmake": a.cmake_name} for a in third_party]
    ).encode()
    path = out_dir / f"{base}.tar.gz"
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"{base}/{name}")
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return path


def published_kernel_files(tag: str) -> Dict[str, bytes]:
    """The compiled custom ops a published vllm-ascend wheel of `tag` holds (names as in the real 0.23.0)."""
    py, _, platform_tag = tag.split("-")
    arch = platform_tag.split("_", 3)[-1]
    return {
        f"vllm_ascend/vllm_ascend_C.cpython-{py[2:]}-{arch}-linux-gnu.so": plain_library(),
        "vllm_ascend/libvllm_ascend_kernels.so": plain_library(),
        "vllm_ascend/_cann_ops_custom/vendors/custom_transformer/op_api/lib/libcust_opapi.so": plain_library(),
    }


#: A stub `cmake` for the venv (the real wheel's console script): `cmake --version` is what the build asks.
CMAKE_SCRIPT = """#!python
import sys
if sys.argv[1:2] == ["--version"]:
    print("cmake version {version}")
"""
