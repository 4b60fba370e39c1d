"""doctor's checks inside a container: what the `docker run` left out, each with the flag that puts it in.
A missing piece fails later and far away (libascend_hal.so not found, DCMI -8005, a coredump at 64 MB of
/dev/shm, HCCL error 19), so doctor names it before vLLM starts."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Dict, List, Mapping, Optional

from ascend_setup.container.facts import (
    DRIVER_LIB64,
    MANAGER_NODES,
    MOUNTS,
    VERSION_INFO,
    container_data,
    container_signals,
    davinci_nodes,
    driver_at_least,
    driver_version,
    group_entry,
    is_char_device,
    minimum_driver,
    parse_cards,
    passwd_entry,
    shm_bytes,
    under,
)
from ascend_setup.dists.installed import read_venv
from ascend_setup.dists.venv_reader import read_pyvenv_cfg
from ascend_setup.errors import BadInput
from ascend_setup.host.checks import GIB, Check
from ascend_setup.host.doctor_checks import DoctorReport

#: The driver's libraries a venv's extensions link to, by where the driver package installs them (the docs'
#: `-v /usr/local/Ascend/driver/lib64/` mount carries both directories): lib64/driver holds libascend_hal.so
#: (torch_npu's NEEDED; vllm-ascend#1440) and libdrvdsmi_host.so, lib64/common the securec libc_sec.so that
#: npu-smi and the HAL need (FIELD_NOTES: "npu-smi needs lib64/common and lib64/driver on LD_LIBRARY_PATH").
DRIVER_LIBRARIES = {
    "libascend_hal.so": "lib64/driver",
    "libdrvdsmi_host.so": "lib64/driver",
    "libc_sec.so": "lib64/common",
}
#: The loader's message for the HAL not found: triage's fix for it is the driver mount (signature libascend-hal).
_HAL_MISSING = "libascend_hal.so: cannot open shared object file: No such file or directory"


def check_devices(root: Path, chips: List[Dict[str, str]]) -> Check:
    """The cards' /dev/davinciN and the three management nodes, each a character device, against the NPUs
    the driver (npu-smi) reports."""
    cards = davinci_nodes(root)
    reported = {int(c["npu"]) for c in chips if c["npu"].isdigit()}
    problems, flags = [], []
    for name in [f"davinci{n}" for n in sorted(reported | set(cards))] + list(MANAGER_NODES):
        node = under(root, f"dev/{name}")
        if not is_char_device(node):
            problems.append(f"/dev/{name} {'is not a device node' if os.path.lexists(node) else 'is missing'}")
            flags.append(f"--device /dev/{name}")
    if not cards and not reported:
        problems.insert(0, "no /dev/davinciN: the container has no NPU")
        flags.insert(0, "--device /dev/davinci0 (one per card, as ascend-setup container run-command prints)")
    seen = ", ".join(f"davinci{n}" for n in cards) or "none"
    if problems:
        return Check("container-devices", "fail", f"{'; '.join(problems)} (cards: {seen})", " ".join(flags))
    if chips and len(chips) < len(cards):
        return Check(
            "container-devices",
            "warn",
            f"the driver reports {len(chips)} NPU(s), the container has nodes for {len(cards)} ({seen})",
            "mount the nodes of the cards npu-smi lists, and only those",
        )
    return Check("container-devices", "pass", f"cards {seen} and {', '.join(MANAGER_NODES)} are device nodes")


def check_mounts(root: Path) -> Check:
    """The driver's files from the host: torch_npu needs libascend_hal.so, npu-smi needs dcmi, CANN reads
    version.info and ascend_install.info."""
    missing = [m for m in MOUNTS if not m.present(root)]
    if missing:
        return Check(
            "container-mounts",
            "fail",
            "missing from the host: " + ", ".join(f"{m.name} ({m.target})" for m in missing),
            " ".join(f"-v {m.target}:{m.target}" for m in missing),
        )
    return Check("container-mounts", "pass", "mounted: " + ", ".join(m.target for m in MOUNTS))


def check_shm(root: Path) -> Check:
    """/dev/shm against the serving need (docker's default is 64 MB: the EngineCore dumps core)."""
    size = shm_bytes(root)
    need = container_data().shm
    fix = f"--shm-size={need.serve_gib:g}g (or --ipc=host)"
    if size is None:
        return Check("container-shm", "fail", "/dev/shm is missing", fix)
    text = f"/dev/shm is {size / GIB:.2f} GiB"
    if size < need.minimum_gib * GIB:
        return Check(
            "container-shm",
            "fail",
            f"{text}, under the {need.minimum_gib:g} GiB vLLM-Ascend's docs start with: the EngineCore dies under load",
            fix,
        )
    if size < need.serve_gib * GIB:
        return Check(
            "container-shm",
            "warn",
            f"{text}, under the {need.serve_gib:g} GiB serving with Ray or several processes needs",
            fix,
        )
    return Check("container-shm", "pass", f"{text} (serving needs {need.serve_gib:g} GiB)")


def check_user(root: Path, uid: int) -> Check:
    """HCCL needs the uid's passwd entry (vllm-ascend#9490: error 19), and a non-root user needs the
    HwHiAiUser group the device nodes belong to."""
    entry = passwd_entry(root, uid)
    if entry is None:
        return Check(
            "container-user",
            "fail",
            f"uid {uid} has no entry in the image's /etc/passwd: HCCL fails to initialise with TP > 1",
            "run as root, or build on the image a user with HwHiAiUser's uid and gid (--user UID:GID)",
        )
    if uid == 0:
        return Check("container-user", "pass", "running as root")
    group = group_entry(root, "HwHiAiUser")
    if group is None or (entry.gid != group[0] and entry.name not in group[1]):
        return Check(
            "container-user",
            "fail",
            f"{entry.name} (uid {uid}) is not in the HwHiAiUser group "
            f"{'(the image has none)' if group is None else ''}: the NPU nodes are HwHiAiUser 0660",
            "--group-add HwHiAiUser's gid (from the host's /etc/group), or run as root",
        )
    return Check("container-user", "pass", f"{entry.name} (uid {uid}) is in HwHiAiUser")


def check_cann_driver(root: Path, cann: Optional[str]) -> Check:
    """The image's CANN against the host's driver (mounted version.info): a driver older than the CANN's
    release needs fails to start it."""
    driver = driver_version(root)
    data = container_data().cann_driver
    if cann is None or driver is None:
        missing = "the image has no CANN" if cann is None else "the host driver's version.info is not mounted"
        return Check(
            "container-cann-driver",
            "warn",
            f"cannot compare the image's CANN with the host's driver: {missing}",
            None if driver else f"-v {VERSION_INFO.target}:{VERSION_INFO.target}",
        )
    lowest = minimum_driver(cann)
    if lowest is None:
        return Check(
            "container-cann-driver",
            "warn",
            f"no data on which drivers CANN {cann} supports ({data.source})",
            "check CANN's release notes for its driver (HDK) version",
        )
    ok = driver_at_least(driver, lowest)
    text = f"image CANN {cann} needs driver >= {lowest}, the host has {driver} ({data.source})"
    if ok is False:
        return Check(
            "container-cann-driver",
            "fail",
            text,
            f"upgrade the host's driver to {lowest} or later, or use "
            f"an image whose CANN this driver supports (ascend-setup matrix list)",
        )
    if ok is None:
        return Check("container-cann-driver", "warn", f"{text}: the driver's version is unreadable")
    return Check("container-cann-driver", "pass", text)


def check_visible(root: Path, env: Mapping[str, str]) -> Check:
    """ASCEND_RT_VISIBLE_DEVICES counts the container's cards from 0 (gpustack#3352: a host index fails);
    ASCEND_VISIBLE_DEVICES names host cards, each of which must be mounted."""
    cards = davinci_nodes(root)
    problems, fixes = [], []
    for var in ("ASCEND_RT_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES"):
        if not env.get(var):
            continue
        try:
            wanted = parse_cards(env[var], var)
        except BadInput as exc:
            problems.append(exc.message)
            fixes.append(f"unset {var} or write it as 0,1")
            continue
        if var == "ASCEND_RT_VISIBLE_DEVICES":
            bad = [c for c in wanted if c >= len(cards)]
            if bad:
                problems.append(
                    f"{var}={env[var]} names {', '.join(map(str, bad))}, but the container sees "
                    f"{len(cards)} card(s), numbered from 0"
                )
                fixes.append(
                    f"{var}={','.join(str(i) for i in range(len(cards))) or 'unset'} (indexes inside the container)"
                )
        else:
            bad = [c for c in wanted if c not in cards]
            if bad:
                problems.append(
                    f"{var}={env[var]} names card(s) {', '.join(map(str, bad))} the container has no node for"
                )
                fixes.append(" ".join(f"--device /dev/davinci{c}" for c in bad))
    if problems:
        return Check("container-visible", "fail", "; ".join(problems), "; ".join(fixes))
    shown = ", ".join(f"{k}={env[k]}" for k in ("ASCEND_RT_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES") if env.get(k))
    return Check(
        "container-visible",
        "pass",
        f"{shown or 'no visible-device variable set'}; the container sees {len(cards)} card(s)",
    )


def check_driver_libraries(root: Path, venv: Path, env: Mapping[str, str]) -> Optional[Check]:
    """The driver's libraries the venv's shared objects need and the container lacks: each of its `.so` files
    loaded as the loader would, with LD_LIBRARY_PATH the environment's plus the driver's lib64, lib64/common and
    lib64/driver (as the images' set_env.sh adds them), so a driver library still unresolved is one the
    `docker run` did not mount. None when there is no venv to check yet."""
    from ascend_setup.native.advice import fix_for  # the ELF reader only when there is a venv to read
    from ascend_setup.native.venv_libs import check_venv, host_target

    if read_pyvenv_cfg(venv) is None:
        return None
    try:
        contents = read_venv(venv)
    except BadInput:
        return None  # not a working venv: the venv check says so
    lib64 = DRIVER_LIB64.target.rstrip("/")
    driver_dirs = [str(under(root, f"{lib64}{d}")) for d in ("", "/common", "/driver")]
    mine = [str(under(root, p)) if os.path.isabs(p) else p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
    target = dataclasses.replace(host_target({"LD_LIBRARY_PATH": ":".join(mine + driver_dirs)}), label="this container")
    report = check_venv(contents, target)
    missing = [
        item for item in report.problems if item.problem.kind == "unresolved" and item.problem.needs in DRIVER_LIBRARIES
    ]
    if not missing:
        return Check(
            "container-driver-libs",
            "pass",
            f"the venv's {report.checked} shared object(s) find every driver library they need in {lib64}",
        )
    named = sorted(
        {
            f"{m.problem.needs} (the driver's {DRIVER_LIBRARIES[m.problem.needs]}) that "
            f"{m.distribution} {m.version}'s {os.path.relpath(m.problem.library, venv)} needs"
            + (f" (through {m.problem.through})" if m.problem.through else "")
            for m in missing
        }
    )
    hal = dataclasses.replace(missing[0].problem, needs="libascend_hal.so", loader_message=_HAL_MISSING)
    return Check(
        "container-driver-libs",
        "fail",
        f"the container lacks {'; '.join(named)}: not in {', '.join(driver_dirs)} nor elsewhere on the loader's path",
        fix_for(hal) or f"-v {DRIVER_LIB64.target}:{DRIVER_LIB64.target}",
    )


def container_checks(
    root: Path,
    *,
    chips: List[Dict[str, str]],
    cann: Optional[str],
    env: Mapping[str, str],
    uid: int,
    venv: Optional[Path] = None,
) -> List[Check]:
    """Every container check, or none when `root` is not a container's (`venv`: whose libraries to load)."""
    signals = container_signals(root)
    if not signals:
        return []
    checks = [
        Check("container", "pass", f"running in a container ({'; '.join(signals)})"),
        check_devices(root, chips),
        check_mounts(root),
        check_shm(root),
        check_user(root, uid),
        check_cann_driver(root, cann),
        check_visible(root, env),
    ]
    driver_libs = check_driver_libraries(root, venv, env) if venv is not None else None
    return checks + ([driver_libs] if driver_libs else [])


def add_container_checks(report: DoctorReport, root: Path, venv: Optional[Path] = None) -> None:
    """doctor's report, with the container checks when it runs in one (their facts under 'container')."""
    cann = report.facts["cann"]["version"] if report.facts["cann"] else None
    checks = container_checks(
        root, chips=report.facts["npu"]["chips"], cann=cann, env=os.environ, uid=os.getuid(), venv=venv
    )
    report.checks += checks
    report.facts["container"] = {"signals": container_signals(root), "cards": davinci_nodes(root)} if checks else None
