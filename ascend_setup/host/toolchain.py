"""What a vllm-ascend source build needs, checked before any download (preflight) and shown by doctor.

Each of these failed a real build only after many minutes: gcc 7.3 (openEuler 20.03, Kylin V10) cannot
compile the C++17 operator code; without CANN's `bisheng` or `bin/setenv.bash` csrc/build.sh stops; a
setuptools older than 67.1 runs setup.py with a relative `__file__`, so ROOT_DIR is empty and
build_aclnn.sh aborts ('ROOT_DIR is not set'); the build calls the venv's cmake (pip's), >= 3.26.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from packaging.version import InvalidVersion, Version

from ascend_setup.host.checks import Check
from ascend_setup.matrix.models import Row
from ascend_setup.matrix.soc import label
from ascend_setup.utils.osrelease import os_release

#: vllm-ascend's install guide: "gcc/g++ higher than 8 and C++17 or higher are required".
GCC_MIN_MAJOR = 9
#: setuptools 67.1 is the first whose build backend gives setup.py an absolute `__file__` here (65 did not:
#: measured with the real 0.23.0 sdist, ROOT_DIR came out empty).
SETUPTOOLS_MIN = Version("67.1")
#: vllm-ascend 0.23.0's [build-system] requires cmake>=3.26; with --no-build-isolation it must be the venv's.
CMAKE_MIN = Version("3.26")
#: Where CANN toolkits keep the AscendC compiler (the first is on set_env.sh's PATH).
BISHENG_DIRS = ("bin", "compiler/ccec_compiler/bin", "tools/ccec_compiler/bin")
#: A C++17 program gcc 7 rejects (std::optional with a structured binding and `if constexpr`).
CXX17_PROBE = (
    "#include <optional>\n#include <utility>\nint main(){auto [a,b]=std::pair<int,int>{1,2};"
    "if constexpr (sizeof(int)>0){std::optional<int> o=a+b;return *o-3;}return 0;}\n"
)


def _tool(check_id: str, ok: bool, detail: str, fix: Optional[str] = None) -> Check:
    """One piece, as the host checks' one type: it passes or it fails (doctor softens a failure to a warning
    where no source build is coming)."""
    return Check(check_id, "pass" if ok else "fail", detail, fix)


def package_manager(release: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """'apt' or 'yum' for this OS family (os-release), None when neither is known."""
    release = os_release() if release is None else release
    names = {release.get("ID", "").lower(), *release.get("ID_LIKE", "").lower().split()}
    if names & {"ubuntu", "debian"}:
        return "apt"
    if names & {"openeuler", "kylin", "euleros", "hce", "centos", "rhel", "rocky", "almalinux", "fedora", "anolis"}:
        return "yum"
    return None


def _compiler_fix(manager: Optional[str]) -> str:
    newer = (
        f"install a GCC >= {GCC_MIN_MAJOR} and point the build at it with C_COMPILER=/path/gcc "
        "CXX_COMPILER=/path/g++ (vllm-ascend's setup.py reads both)"
    )
    if manager == "apt":
        return f"sudo apt-get install -y gcc g++ (Ubuntu 20.04 and later ship GCC 9+); or {newer}"
    if manager == "yum":
        return (
            f"sudo yum install -y gcc gcc-c++; openEuler 20.03 and Kylin V10 ship GCC 7.3: "
            f"sudo yum install -y gcc-toolset-10-gcc gcc-toolset-10-gcc-c++ where offered, or {newer}"
        )
    return newer


def _version_of(exe: str) -> Tuple[Optional[Version], str]:
    try:
        proc = subprocess.run([exe, "-dumpfullversion", "-dumpversion"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, str(exc)
    text = proc.stdout.strip().split()[0] if proc.stdout.strip() else ""
    try:
        return Version(text), text
    except InvalidVersion:
        return None, text or proc.stderr.strip()[-200:]


def _compilers(env: Mapping[str, str], manager: Optional[str]) -> List[Check]:
    checks = []
    for check_id, var, default in (("gcc", "C_COMPILER", "gcc"), ("g++", "CXX_COMPILER", "g++")):
        name = env.get(var) or default
        exe = shutil.which(name, path=env.get("PATH"))
        if exe is None:
            checks.append(
                _tool(
                    check_id,
                    False,
                    f"no {name} on PATH" + (f" ({var})" if env.get(var) else ""),
                    _compiler_fix(manager),
                )
            )
            continue
        version, text = _version_of(exe)
        if version is None or version.major < GCC_MIN_MAJOR:
            checks.append(
                _tool(
                    check_id,
                    False,
                    f"{exe} is {text or 'of unknown version'}; the operator build needs GCC >= {GCC_MIN_MAJOR}",
                    _compiler_fix(manager),
                )
            )
            continue
        detail = f"{exe} {version}"
        if check_id == "g++":
            proc = subprocess.run(
                [exe, "-std=c++17", "-fsyntax-only", "-x", "c++", "-"],
                input=CXX17_PROBE,
                capture_output=True,
                text=True,
                timeout=60,
            )
            if proc.returncode != 0:
                checks.append(
                    _tool(
                        "c++17",
                        False,
                        f"{exe} {version} does not compile C++17: "
                        f"{(proc.stderr.strip().splitlines() or ['?'])[0][:160]}",
                        _compiler_fix(manager),
                    )
                )
                continue
            detail += ", C++17"
        checks.append(_tool(check_id, True, detail))
    return checks


def _cann_tools(toolkit: Optional[Path], row: Row, arch: str) -> List[Check]:
    reinstall = (
        f"install (or reinstall) the CANN {row.cann} toolkit "
        f"(Ascend-cann-toolkit_{row.cann}_linux-{arch}.run --install)"
    )
    if toolkit is None:
        return [
            _tool("bisheng", False, "no CANN toolkit, so no bisheng", reinstall),
            _tool("setenv.bash", False, "no CANN toolkit, so no bin/setenv.bash", reinstall),
        ]
    bisheng = next(
        (
            toolkit / d / "bisheng"
            for d in BISHENG_DIRS
            if (toolkit / d / "bisheng").is_file() and os.access(toolkit / d / "bisheng", os.X_OK)
        ),
        None,
    )
    setenv = toolkit / "bin" / "setenv.bash"
    return [
        _tool(
            "bisheng",
            bisheng is not None,
            str(bisheng) if bisheng else f"no bisheng (AscendC compiler) under {toolkit} ({', '.join(BISHENG_DIRS)})",
            None if bisheng else f"{reinstall}: csrc/build.sh stops without bisheng",
        ),
        _tool(
            "setenv.bash",
            setenv.is_file(),
            str(setenv) if setenv.is_file() else f"no {setenv}",
            None if setenv.is_file() else f"{reinstall}: csrc/build.sh sources it",
        ),
    ]


def lock_tool_checks(pins: Mapping[str, Optional[str]], backend: Optional[str]) -> List[Check]:
    """The build tools the lock installs into the venv (the build runs without isolation, so they are its):
    cmake always, setuptools when it is the sdist's build backend (the real 0.23.0 sdist's is)."""
    wanted = [("cmake", CMAKE_MIN, "vllm-ascend's build requires cmake>=3.26 from the venv")]
    if backend and backend.startswith("setuptools"):
        wanted.append(
            ("setuptools", SETUPTOOLS_MIN, "older ones leave setup.py's ROOT_DIR empty and build_aclnn.sh aborts")
        )
    checks = []
    for name, minimum, why in wanted:
        have = pins.get(name)
        try:
            ok = have is not None and Version(have) >= minimum
        except InvalidVersion:
            ok = False
        detail = f"{name} {have} in the lock" if have else f"no {name} in the lock"
        checks.append(
            _tool(
                name,
                ok,
                detail if ok else f"{detail}; the build needs {name} >= {minimum} ({why})",
                None
                if ok
                else f"let the lock take {name}>={minimum}: drop the pip constraint or "
                f"--lock that holds it back, and run again",
            )
        )
    return checks


def toolchain_checks(
    row: Row,
    *,
    toolkit: Optional[Path],
    arch: str,
    pins: Optional[Mapping[str, Optional[str]]] = None,
    backend: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    release: Optional[Mapping[str, str]] = None,
) -> List[Check]:
    """Every piece at once: gcc and g++ (version, C++17), CANN's bisheng and bin/setenv.bash, and, given the
    lock's pins and the sdist's build backend, its cmake and setuptools. Preflight and doctor show this list."""
    manager = package_manager(release)
    checks = _compilers(dict(os.environ if env is None else env), manager) + _cann_tools(toolkit, row, arch)
    return checks + (lock_tool_checks(pins, backend) if pins is not None else [])


def builds_from_source(row: Row, arch: str, glibc: Optional[str], device: Optional[str]) -> Optional[str]:
    """Why the row's vllm-ascend will be built from source on this host, by the row (None: its wheel fits).
    The lock decides in the end; this lets preflight check the toolchain before anything is resolved."""
    needs: Dict[str, str] = dict(row.wheel_glibc.get("vllm-ascend", {}))
    if arch not in needs:
        return f"no published vllm-ascend wheel for {arch}"
    if glibc is None or tuple(map(int, glibc.split("."))) < tuple(map(int, needs[arch].split("."))):
        return f"its wheels need glibc {needs[arch]} (this host has {glibc or 'none'})"
    made_for = row.wheel_device_of("vllm-ascend", arch)
    if made_for and device and device != made_for:
        return f"its wheels are built for {label(made_for)} NPUs and this host's are {label(device)}"
    return None
