"""The 9.1.0 stack as stub distributions: real names, versions and Requires-Dist, no real code.

vllm's and vllm-ascend's Requires-Dist are the real ones (data/simulate, read once from their METADATA).
Every other requirement gets a stub whose version satisfies all the specifiers that apply, and the
traps of the field are laid on purpose: torch 2.11.0 (vllm's CUDA pin) and a transformers newer than
the plugin's pin sit on the index, xgrammar pulls upstream triton on x86 (whose jit returns a plain
function), CUDA-only packages are there to be wrongly installed, and triton-ascend 3.2.2 lives only on
a second, "Ascend" index.

What the real index taught us is modelled too: caps two levels down decide versions (mistral-common
caps numpy below 2.4, transformers caps tokenizers, fastapi caps starlette, which keeps
prometheus-fastapi-instrumentator at 7.x); xgrammar pulls back apache-tvm-ffi, which vllm's list
names as CUDA-only; llguidance is an sdist with a maturin (Rust) backend where its wheels need a newer
glibc; x86_64 torch-npu requires `torch==2.10.0+cpu`, which only a third, "PyTorch CPU" index serves,
while the main index's x86_64 torch is a CUDA build that drags nvidia-* wheels and upstream triton.
"""

from __future__ import annotations

import ensurepip
import shutil
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from ascend_setup.simulate.dists import build_sdist, build_wheel
from ascend_setup.simulate.native_stubs import post_231_library
from ascend_setup.simulate.stub_plugin import CMAKE_SCRIPT, published_kernel_files
from ascend_setup.simulate.stub_plugin_config import FILES as PLUGIN_CONFIG_FILES
from ascend_setup.simulate.stub_vllm import vllm_files

DATA = Path(__file__).resolve().parent.parent / "data" / "simulate"
ARCH_TAGS = ("manylinux_2_28_x86_64", "manylinux_2_28_aarch64")
#: CPython versions the torch family publishes wheels for (triton-ascend by default cp311 only, like the real
#: index's triton-ascend, which has no cp312 wheel).
TORCH_PYTHONS = ("cp310", "cp311", "cp312")

TRITON_ASCEND_INIT = '''\
"""stub triton-ascend: jit gives a kernel object that can be indexed with a grid."""
__version__ = "3.2.2"
class JITFunction:
    def __init__(self, fn):
        self.fn = fn
    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.fn(*args, **kwargs)
def jit(fn=None, **kwargs):
    return JITFunction(fn) if fn is not None else (lambda f: JITFunction(f))
'''

UPSTREAM_TRITON_INIT = '''\
"""stub upstream triton without an NPU driver: jit hands back the plain function."""
__version__ = "3.5.0"
def jit(fn=None, **kwargs):
    return fn if fn is not None else (lambda f: f)
'''


def requires_of(metadata_file: str) -> List[str]:
    message = HeaderParser().parsestr((DATA / metadata_file).read_text())
    return message.get_all("Requires-Dist") or []


VLLM_REQUIRES = requires_of("vllm-0.23.0.METADATA")
PLUGIN_REQUIRES = requires_of("vllm_ascend-0.23.0.METADATA")


def _pick_version(specs: List[SpecifierSet]) -> str:
    """A version every specifier accepts, from the versions they mention (and a few neighbours)."""
    candidates = {Version("1.0"), Version("0.1"), Version("99.0")}
    for spec in specs:
        for s in spec:
            base = Version(s.version.replace(".*", ""))
            candidates |= {base, Version(f"{base.major}.{base.minor}.{base.micro + 1}"), Version(f"{base.major + 1}.0")}
    fitting = [v for v in candidates if all(spec.contains(v, prereleases=True) for spec in specs)]
    if not fitting:
        raise ValueError(f"no stub version satisfies {specs}")
    exact = [v for v in fitting if any(s.operator == "==" for spec in specs for s in spec)]
    return str(min(exact or fitting))


@dataclass
class Ecosystem:
    main: Path
    ascend: Path
    pytorch_cpu: Path
    versions: Dict[str, str]


#: Transitive structure from the real index: (name, version, requires).
TRANSITIVE = (
    ("numpy", "2.3.5", ()),
    ("numpy", "2.4.6", ()),
    ("mistral-common", "1.11.3", ('numpy<2.4; python_version < "3.13"',)),
    ("tokenizers", "0.22.2", ()),
    ("tokenizers", "0.23.3", ()),
    ("starlette", "0.50.0", ()),
    ("starlette", "1.0.0", ()),
    ("fastapi", "0.115.0", ("starlette<0.51,>=0.40",)),
    ("prometheus-fastapi-instrumentator", "7.1.0", ("starlette>=0.30",)),
    ("prometheus-fastapi-instrumentator", "8.1.0", ("starlette>=1.0",)),
)
NVIDIA = ("nvidia-cublas-cu12", "nvidia-cudnn-cu12")
LLGUIDANCE_PYPROJECT = '[build-system]\nrequires = ["maturin>=1.5,<2"]\nbuild-backend = "maturin"\n'


#: The part of torch's tensor API that `ascend-setup probe` uses (ones, empty_like, copy_), over a bytearray, so the
#: demo's venv can run the probe it recommends; and an NPU as torch_npu shows a 910B4 (torch.npu: set_device,
#: mem_get_info, synchronize): 31,662,800,896 B visible (vllm-ascend #5044's worker line), 282 MiB of it held by the
#: idle card (its npu-smi line), a context made by the first set_device (0.38 GiB, vllm-ascend #9606's start-up
#: line), and each tensor on it taking its bytes from what mem_get_info calls free.
TORCH_TENSORS = """
float16 = "float16"
_npu_used = [282 * 2**20]


class Tensor:
    def __init__(self, data, device="cpu"):
        self.data = data
        self.device = device
        if device.startswith("npu"):
            _npu_used[0] += len(data)

    def copy_(self, other):
        self.data[:] = other.data
        return self


def ones(n, dtype=float16, device="cpu"):
    return Tensor(bytearray(b"\\x01") * (2 * n), device)


def empty_like(other):
    return Tensor(bytearray(len(other.data)), other.device)


class npu:
    current = None

    @staticmethod
    def set_device(device):
        if npu.current is None:
            _npu_used[0] += int(0.38 * 2**30)
        npu.current = device

    @staticmethod
    def mem_get_info():
        return 31662800896 - _npu_used[0], 31662800896

    @staticmethod
    def synchronize():
        pass
"""


def torch_files(version: str, cuda: Optional[str]) -> Dict[str, str]:
    """A stub torch: a CUDA build imports its nvidia-* libraries (and fails without them), and says so in
    torch/version.py, as the real one does."""
    imports = "".join(f"import {n.replace('-', '_')}  # noqa: F401\n" for n in NVIDIA) if cuda else ""
    return {
        "torch/__init__.py": f"{imports}__version__ = {version!r}\n{TORCH_TENSORS}",
        "torch/version.py": f"cuda = {cuda!r}\n__version__ = {version!r}\n",
    }


def _torch_family(main: Path, pytorch_cpu: Path, row_packages: Dict[str, str], py_tags: Sequence[str]) -> None:
    """aarch64: plain pins on the main index. x86_64: the main index's torch is a CUDA build (nvidia-*,
    upstream triton); the `+cpu` builds live on the PyTorch CPU index; torch-npu's x86_64 wheel
    requires the `+cpu` torch (as the real METADATA does)."""
    torch, vision, audio = (row_packages[n] for n in ("torch", "torchvision", "torchaudio"))
    cpu_files = torch_files(torch, cuda=None)
    for py in py_tags:
        build_wheel(main, "torch", torch, tag=f"{py}-{py}-manylinux_2_28_aarch64", files=cpu_files)
        build_wheel(
            main,
            "torch",
            torch,
            tag=f"{py}-{py}-manylinux_2_28_x86_64",
            files=torch_files(torch, cuda="12.8"),
            requires=[*NVIDIA, 'triton==3.5.0; platform_machine == "x86_64"'],
        )
        build_wheel(
            pytorch_cpu,
            "torch",
            f"{torch}+cpu",
            tag=f"{py}-{py}-manylinux_2_28_x86_64",
            files=torch_files(f"{torch}+cpu", cuda=None),
        )
        for name, version in (("torchvision", vision), ("torchaudio", audio)):
            for arch in ("aarch64", "x86_64"):
                build_wheel(main, name, version, tag=f"{py}-{py}-manylinux_2_28_{arch}", requires=[f"torch=={torch}"])
            build_wheel(
                pytorch_cpu,
                name,
                f"{version}+cpu",
                tag=f"{py}-{py}-manylinux_2_28_x86_64",
                requires=[f"torch=={torch}+cpu"],
            )
        build_wheel(
            main,
            "torch-npu",
            row_packages["torch-npu"],
            tag=f"{py}-{py}-manylinux_2_28_aarch64",
            requires=[f"torch=={torch}"],
        )
        build_wheel(
            main,
            "torch-npu",
            row_packages["torch-npu"],
            tag=f"{py}-{py}-manylinux_2_28_x86_64",
            requires=[f"torch=={torch}+cpu"],
        )
    for name in NVIDIA:
        build_wheel(main, name, "12.8.0", tag="py3-none-manylinux_2_28_x86_64")
    # a trap on the PyTorch CPU index: were it asked for anything but the torch family, this would win
    build_wheel(pytorch_cpu, "requests", "99.0")


def stub_versions(row_packages: Dict[str, str], cann_deps: Dict[str, Optional[str]]) -> Dict[str, str]:
    """name -> version for every requirement of vllm and vllm-ascend and every CANN compiler dep."""
    specs: Dict[str, List[SpecifierSet]] = {}
    for text in VLLM_REQUIRES + PLUGIN_REQUIRES:
        req = Requirement(text)
        if req.marker is not None and "extra" in str(req.marker):
            continue
        specs.setdefault(canonicalize_name(req.name), []).append(req.specifier)
    for name, minimum in cann_deps.items():
        specs.setdefault(name, []).append(SpecifierSet(f">={minimum}" if minimum else ""))
    versions = {name: _pick_version(s) for name, s in specs.items() if name not in row_packages}
    versions.update(row_packages)
    return versions


def plugin_wheel_files(version: str) -> Dict[str, str]:
    """What the published vllm-ascend wheels hold that the tool reads: `_build_info.py` says A2, as the
    real 0.23.0 wheels' does (they are built for Atlas A2 only)."""
    return {
        "vllm_ascend/__init__.py": f"__version__ = {version!r}\n",
        "vllm_ascend/_build_info.py": "# Auto-generated file\n__device_type__ = 'A2'\n",
        **PLUGIN_CONFIG_FILES,
    }


def build_ecosystem(
    root: Path,
    row_packages: Dict[str, str],
    cann_deps: Dict[str, Optional[str]],
    vllm_ascend_sdist: Optional[Path] = None,
    plugin_wheel_arches: Sequence[str] = ("x86_64", "aarch64"),
    plugin_wheel_glibc: str = "2.34",
    triton_pythons: Sequence[str] = ("cp311",),
    venv_tools: Optional[Path] = None,
    understated: Sequence[str] = (),
) -> Ecosystem:
    """The three indexes' files. `plugin_wheel_arches` limits vllm-ascend's wheels, to force a source
    build; `plugin_wheel_glibc` sets their manylinux level (the real ones need 2.34). `venv_tools`: where the
    real pip and setuptools wheels come from (the venv interpreter's ensurepip), else this interpreter's.
    `understated`: ordinary stubs whose wheels are tagged manylinux_2_28 and hold a library that needs
    GLIBC_2.34 (native_stubs.post_231_library: with a C compiler only), as vllm's tags once understated it."""
    main, ascend, pytorch_cpu = root / "main", root / "ascend", root / "pytorch-cpu"
    versions = stub_versions(row_packages, cann_deps)
    real = {"pip", "setuptools"}  # the venv's own tools: serve the real wheels, never stubs
    for directory in (main, ascend, pytorch_cpu):
        directory.mkdir(parents=True, exist_ok=True)
    for wheel in (venv_tools or Path(ensurepip.__file__).parent / "_bundled").glob("*.whl"):
        shutil.copy(wheel, main / wheel.name)
    special = {
        "vllm",
        "vllm-ascend",
        "torch",
        "torch-npu",
        "torchvision",
        "torchaudio",
        "triton-ascend",
        "xgrammar",
        "arctic-inference",
        "tilelang",
        "transformers",
        "llguidance",
        *NVIDIA,
        *(name for name, _, _ in TRANSITIVE),
    }
    for name, version in sorted(versions.items()):
        if name in real or name in special:
            continue
        files = {"cmake/__init__.py": "", f"cmake-{version}.data/scripts/cmake": CMAKE_SCRIPT.format(version=version)}
        library = post_231_library() if name in understated else None
        if library is not None:
            module = canonicalize_name(name).replace("-", "_")
            for tag in ARCH_TAGS:
                build_wheel(
                    main,
                    name,
                    version,
                    tag=f"py3-none-{tag}",
                    files={f"{module}/__init__.py": "", f"{module}/_native.so": library},
                )
            continue
        build_wheel(main, name, version, files=files if name == "cmake" else None)
    for name, version, requires in TRANSITIVE:
        build_wheel(main, name, version, requires=requires)
        versions[name] = version
    build_wheel(main, "transformers", row_packages["transformers"], requires=["tokenizers<=0.23.0,>=0.22.0"])
    llguidance = versions["llguidance"]
    build_wheel(main, "llguidance", llguidance, tag="cp39-abi3-manylinux_2_31_x86_64")
    build_wheel(main, "llguidance", llguidance, tag="cp39-abi3-manylinux_2_28_aarch64")
    build_sdist(main, "llguidance", llguidance, extra_files={"pyproject.toml": LLGUIDANCE_PYPROJECT})
    _torch_family(main, pytorch_cpu, row_packages, TORCH_PYTHONS)
    # the stack, with wheels for both architectures
    for tag in ARCH_TAGS:
        build_wheel(
            main,
            "vllm",
            row_packages["vllm"],
            tag=f"cp38-abi3-{tag}",
            requires=VLLM_REQUIRES,
            files=vllm_files(row_packages["vllm"]),
        )
        for py in triton_pythons:
            build_wheel(
                ascend,
                "triton-ascend",
                row_packages["triton-ascend"],
                tag=f"{py}-{py}-{tag}",
                files={"triton/__init__.py": TRITON_ASCEND_INIT},
            )
    for name, version in (("torch", "2.11.0"), ("torchvision", "0.26.0"), ("torchaudio", "2.11.0")):
        build_wheel(main, name, version, tag="py3-none-any")
    build_wheel(main, "transformers", "5.6.0")  # allowed by vllm, not by the plugin's pin
    level = plugin_wheel_glibc.replace(".", "_")
    for tag in (f"manylinux_{level}_{arch}" for arch in plugin_wheel_arches):
        for py in ("cp310", "cp311", "cp312"):
            build_wheel(
                main,
                "vllm-ascend",
                row_packages["vllm-ascend"],
                tag=f"{py}-{py}-{tag}",
                requires=PLUGIN_REQUIRES,
                files={**plugin_wheel_files(row_packages["vllm-ascend"]), **published_kernel_files(f"{py}-{py}-{tag}")},
            )
    if vllm_ascend_sdist is not None:
        shutil.copy(vllm_ascend_sdist, main / vllm_ascend_sdist.name)
    else:
        build_sdist(main, "vllm-ascend", row_packages["vllm-ascend"], requires=PLUGIN_REQUIRES)
    build_sdist(main, "arctic-inference", row_packages["arctic-inference"])
    build_wheel(main, "tilelang", "0.1.9", tag="cp311-cp311-manylinux_2_34_aarch64")
    build_wheel(
        main,
        "triton-ascend",
        "3.2.0",
        tag="cp311-cp311-manylinux_2_28_x86_64",
        files={"triton/__init__.py": TRITON_ASCEND_INIT.replace("3.2.2", "3.2.0")},
    )
    build_wheel(main, "triton", "3.5.0", tag="py3-none-any", files={"triton/__init__.py": UPSTREAM_TRITON_INIT})
    build_wheel(
        main,
        "xgrammar",
        versions["xgrammar"],
        requires=['triton; platform_machine == "x86_64"', "apache-tvm-ffi"],
        files={"xgrammar/__init__.py": "import apache_tvm_ffi  # noqa: F401  (as the real one does)\n"},
    )
    for name in ("flashinfer-python", "flashinfer-cubin", "nvidia-cudnn-frontend", "fastsafetensors"):
        build_wheel(main, name, "1.0")
    return Ecosystem(main=main, ascend=ascend, pytorch_cpu=pytorch_cpu, versions=versions)


def readme(cann: str) -> str:
    """The Prerequisites of vllm-ascend's README (its metadata's body), as the real releases carry it."""
    return f"## Prerequisites\n\n- Python >= 3.10, < 3.13\n- CANN == {cann} (For Ascend HDK version, see the notes)\n"


def build_newer_plugin_releases(out_dir: Path) -> List[Path]:
    """The releases the real index had after 0.23.0 (December 2026), as stubs: 0.23.0.post1 (CANN 9.1.0, sdist only,
    memfabric_hybrid/memcache_hybrid pinned to 1.2.0), 0.26.0rc1 (CANN 9.1.0, vLLM 0.26.0, transformers 5.14.1,
    wheels) and 0.30.0rc2 (CANN 9.2.0 by its Dockerfile, yet its README still says 9.1.0; sdist only, fastokens)."""

    def pinned(changes: Dict[str, str], extra: Sequence[str] = ()) -> List[str]:
        out = []
        for text in PLUGIN_REQUIRES:
            name = canonicalize_name(Requirement(text).name)
            out.append(f"{name}=={changes[name]}" if name in changes else text)
        return out + list(extra)

    hybrid = {"memfabric-hybrid": "1.2.0", "memcache-hybrid": "1.2.0"}
    made = [
        build_sdist(
            out_dir,
            "vllm-ascend",
            "0.23.0.post1",
            requires=pinned(hybrid),
            requires_python=">=3.10",
            description=readme("9.1.0"),
        )
    ]
    rc = pinned({**hybrid, "transformers": "5.14.1"})
    for arch in ("aarch64", "x86_64"):
        made.append(
            build_wheel(
                out_dir,
                "vllm-ascend",
                "0.26.0rc1",
                tag=f"cp311-cp311-manylinux_2_34_{arch}",
                requires=rc,
                requires_python=">=3.10",
                description=readme("9.1.0"),
            )
        )
    made.append(
        build_sdist(
            out_dir,
            "vllm-ascend",
            "0.30.0rc2",
            requires=pinned(hybrid | {"transformers": "5.14.1"}, ["fastokens==0.2.0"]),
            requires_python=">=3.10",
            description=readme("9.1.0"),
        )
    )
    return made
