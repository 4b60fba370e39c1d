"""`ascend-setup bundle` and `bundle verify`: an offline bundle for a target, made on any connected machine;
its check against its manifest."""

from __future__ import annotations

import argparse
import platform
import shutil
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ascend_setup.bundle.make import BundleRequest, built_wheel, make_bundle, open_out_dir, staging_dir, write_tar
from ascend_setup.bundle.manifest import Manifest, Missing, verify_bundle
from ascend_setup.cli import flags
from ascend_setup.cli.progress import TransferProgress, size_text
from ascend_setup.cli.render import Output, print_field, print_prose, stderr_console, stdout_console
from ascend_setup.commands.plan import target_python
from ascend_setup.errors import BadInput
from ascend_setup.host.machine import glibc_version
from ascend_setup.index.pipconfig import network_settings_for_this_run, pip_settings
from ascend_setup.index.tags import Target
from ascend_setup.managed.pinned import PythonBuild, PythonBuilds, load_builds
from ascend_setup.matrix import load_matrix, select_row
from ascend_setup.matrix.models import Row
from ascend_setup.matrix.newcann import provenance_line, with_derived_row
from ascend_setup.matrix.soc import device_of
from ascend_setup.resolve.closure import IndexSources
from ascend_setup.resolve.index_session import IndexSession
from ascend_setup.resolve.lockfile import read_lock
from ascend_setup.resolve.pythons import build_interpreter
from ascend_setup.steps.options import (
    check_build_deps_url,
    check_device,
    check_index_url,
    check_python_builds,
    check_python_mirror,
    check_soc,
    parse_index_overrides,
)
from ascend_setup.utils.paths import check_dir_path, check_output_file


def _soc(value: str) -> Tuple[Optional[str], Optional[str]]:
    """(device type, SOC_VERSION or None): --soc names a device type (A2) or one SOC_VERSION (ascend910b3)."""
    if device_of(value) is not None and value.strip().lower().startswith("ascend"):
        return device_of(value), check_soc(value)
    return check_device(value), None


def manifest_json(manifest: Manifest, path: Path, problems: Optional[List[str]] = None) -> Dict[str, Any]:
    roles: Dict[str, Dict[str, int]] = {}
    for f in manifest.files:
        roles.setdefault(f.role, {"files": 0, "bytes": 0})
        roles[f.role]["files"] += 1
        roles[f.role]["bytes"] += f.size
    data = {
        "bundle": str(path),
        "ok": not manifest.missing and not problems,
        "cann": manifest.cann,
        "target": manifest.target.model_dump(),
        "tool_version": manifest.tool_version,
        "created": manifest.created,
        "size": manifest.size,
        "files": len(manifest.files),
        "roles": roles,
        "missing": [m.model_dump() for m in manifest.missing],
    }
    if problems is not None:
        data["problems"] = problems
    return data


def missing_text(m: Missing) -> str:
    return f"{m.package}{' ' + m.version if m.version else ''}: {m.reason}"


def render_summary(manifest: Manifest, path: Path) -> None:
    """The size and what the bundle holds, one role a line, then each file it could not get."""
    out = stdout_console()
    t = manifest.target
    npus = t.soc or t.device
    print_prose(
        out,
        f"bundle {path}: CANN {manifest.cann} for {t.arch} / glibc {t.glibc} / Python {t.python}"
        f"{' / ' + npus if npus else ''}, {len(manifest.files)} files, "
        f"{size_text(manifest.size)}",
    )
    for role, info in manifest_json(manifest, path)["roles"].items():
        print_field(out, role, f"{info['files']} files, {size_text(info['bytes'])}")
    for m in manifest.missing:
        print_prose(out, missing_text(m), "    ", first="  not in the bundle: ")
    if not manifest.missing:
        print_prose(
            out,
            f"install it offline: copy {path.name} to the host, then run sh {path.name}/bootstrap.sh"
            if path.is_dir()
            else f"install it offline: copy {path.name} to the host, unpack it (tar xf), then run sh "
            "bootstrap.sh in it, or run 'ascend-setup install --bundle' on the tar",
        )


def managed_build(builds: PythonBuilds, target: Target) -> PythonBuild:
    """The pinned CPython build --with-python carries: the target's Python, for its architecture."""
    found = builds.find(target.python, target.arch)
    if found is None:
        have = ", ".join(builds.minors(target.arch)) or "none"
        raise BadInput(
            f"--with-python: no pinned CPython {target.python} build for {target.arch} (pinned: {have})",
            hint="pass --python with a pinned version, or --python-builds FILE naming one",
        )
    return found


def run(args: argparse.Namespace, output: Output) -> int:
    if getattr(args, "bundle_command", None) == "verify":
        return run_verify(args, output)
    if not args.cann or not args.out:
        raise BadInput("bundle needs --cann VERSION and -o PATH (or: ascend-setup bundle verify PATH)")
    overrides = parse_index_overrides(args.index or [])
    matrix = load_matrix(args.matrix).with_indexes(overrides)
    arch = args.arch or platform.machine()
    glibc = args.glibc or glibc_version() or ""
    Target.parse(glibc, arch, args.python or "3.11")
    device, soc = _soc(args.soc)
    out = Path(args.out).expanduser().absolute()
    if args.format == "tar":
        check_output_file(out, "-o")
        check_dir_path(staging_dir(out), "-o")
    else:
        check_dir_path(out, "-o")
    lock_file = Path(args.lock).expanduser().absolute() if args.lock else None
    if lock_file is not None:
        read_lock(lock_file)  # a bad --lock is refused before the bundle directory is made
    wheelhouse = Path(args.wheelhouse).expanduser().absolute() if args.wheelhouse else None
    if wheelhouse is not None and not wheelhouse.is_dir():
        raise BadInput(f"--wheelhouse {wheelhouse} is not a directory")
    build_deps = check_build_deps_url(args.build_deps_url)
    python_mirror = check_python_mirror(args.python_mirror)
    if (args.python_mirror or args.python_builds) and not args.with_python:
        raise BadInput(
            "--python-mirror and --python-builds choose the interpreter --with-python carries: add --with-python"
        )
    settings = network_settings_for_this_run(pip_settings(respect=args.respect_pip_config))
    mirror = check_index_url(args.index_url, "--index-url") if args.index_url else settings.index
    matrix, derived = with_derived_row(matrix, args.cann, args.vllm_ascend, lambda: mirror)
    err = stderr_console()
    derived_line = provenance_line(derived, matrix) if derived is not None else None
    if derived_line:
        err.print(derived_line, soft_wrap=True, markup=False)
    row = select_row(matrix, args.cann, arch)
    extras = [check_index_url(u, "--extra-index-url") for u in args.extra_index_url or []]
    tool_index = check_index_url(args.tool_index_url, "--tool-index-url") if args.tool_index_url else mirror
    sources = IndexSources.for_row(matrix, row, mirror, extras)
    index = IndexSession(settings)
    python, note = target_python(args.python, row, sources, arch, glibc, index)
    if note:
        err.print(f"note: {note}", soft_wrap=True, markup=False)
    target = Target.parse(glibc, arch, python)
    python_builds = load_builds(check_python_builds(args.python_builds)) if args.with_python else None
    python_build = managed_build(python_builds, target) if python_builds is not None else None
    if wheelhouse is not None:
        built_wheel(wheelhouse, row, target, soc)  # a --wheelhouse without the target's wheel: refused now
    if args.format == "tar" and out.is_file() and not staging_dir(out).exists():
        return finished_tar(out, row, target, output)
    directory = open_out_dir(staging_dir(out) if args.format == "tar" else out)
    log = directory / "bundle.log"
    req = BundleRequest(
        out=directory,
        row=row,
        target=target,
        sources=sources,
        device=device,
        soc=soc,
        derived=derived_line,
        lock_file=lock_file,
        wheelhouse=wheelhouse,
        build_deps_url=build_deps,
        build_python=build_interpreter(python),
        tool_index=tool_index,
        log=log,
        python_build=python_build,
        python_builds=python_builds,
        python_mirror=python_mirror,
    )

    def say(line: str) -> None:
        err.print(line, soft_wrap=True, markup=False, highlight=False)

    manifest = make_bundle(req, index, lambda files, total: TransferProgress(err, "bundle", files, total), say)
    path = directory
    if args.format == "tar" and not manifest.missing:
        path = write_tar(directory, out)
        shutil.rmtree(directory)  # ours: the tar holds it all now
    if args.json:
        output.print_json(manifest_json(manifest, path))
    else:
        render_summary(manifest, path)
    return 1 if manifest.missing else 0


def finished_tar(out: Path, row: Row, target: Target, output: Output) -> int:
    """A rerun of a bundle whose tar is made: checked and shown, not made again (another target's is refused)."""
    manifest, problems = verify_bundle(out, "-o")
    t = manifest.target
    if (manifest.cann, t.arch, t.glibc, t.python) != (row.cann, target.arch, target.glibc, target.python):
        raise BadInput(
            f"-o {out} is a bundle of CANN {manifest.cann} for {t.arch} / glibc {t.glibc} / Python {t.python} already",
            hint="give another -o for this target",
        )
    if output.json:
        output.print_json(manifest_json(manifest, out, problems))
    else:
        render_summary(manifest, out)
        for line in problems:
            print_prose(stdout_console(), line, "    ", first="  ")
    return 1 if problems or manifest.missing else 0


def run_verify(args: argparse.Namespace, output: Output) -> int:
    path = Path(args.path).expanduser().absolute()
    manifest, problems = verify_bundle(path)
    if args.json:
        output.print_json(manifest_json(manifest, path, problems))
    else:
        out = stdout_console()
        t = manifest.target
        print_prose(
            out,
            f"bundle {path}: CANN {manifest.cann} for {t.arch} / glibc {t.glibc} / Python {t.python}, "
            f"{len(manifest.files)} files, {size_text(manifest.size)}: "
            + ("every file matches its sha256" if not problems else f"{len(problems)} problem(s)"),
        )
        for line in problems:
            print_prose(out, line, "    ", first="  ")
        for m in manifest.missing:
            print_prose(out, missing_text(m), "    ", first="  not in the bundle: ")
    return 1 if problems or manifest.missing else 0


def bundle_arguments(p: argparse.ArgumentParser) -> None:
    flags.common(p)
    flags.cann(p)
    flags.target(p)
    p.add_argument("--python", metavar="X.Y", help="target Python, e.g. 3.11 (default: as plan picks it)")
    flags.soc(
        p,
        "the target's NPUs: A2, A3, 310P, A5 or a SOC_VERSION such as ascend910b3 (default A2); install "
        "refuses the bundle on other NPUs",
        metavar="DEVICE|SOC_VERSION",
        default="A2",
    )
    flags.lock(p, "bundle this lock (from 'plan --lock') instead of resolving")
    p.add_argument(
        "--wheelhouse",
        metavar="DIR",
        help="take a built vllm-ascend wheel from DIR/<key>/ (an install's "
        "<workdir>/wheelhouse) whose key matches the target; needs --soc SOC_VERSION",
    )
    flags.index_url(p, "primary index (default: pip's configuration)")
    flags.extra_index_url(p, "another index beside the primary one, for anything the row does not assign (repeatable)")
    flags.index_overrides(p)
    flags.vllm_ascend(p)
    flags.build_deps_url(p)
    p.add_argument(
        "--tool-index-url",
        metavar="URL",
        help="the index the tool's own dependencies come from (default: the primary index)",
    )
    p.add_argument(
        "--with-python",
        action="store_true",
        help="carry a managed CPython (the target's Python, a "
        "pinned build) for a host with no interpreter in the row's range; its install takes it from here",
    )
    flags.managed_python(p, "with --with-python: ")
    p.add_argument(
        "-o",
        "--out",
        metavar="PATH",
        help="the bundle: a directory (a rerun continues it), or with --format tar the tar file",
    )
    p.add_argument("--format", choices=["dir", "tar"], default="dir", help="a directory (default) or one tar file")
    p.set_defaults(func=run)
    sub = p.add_subparsers(dest="bundle_command", metavar="verify")
    b = sub.add_parser(
        "verify", help="check a bundle's manifest and every file's sha256; exit 1 names each missing or corrupt file"
    )
    flags.common(b)
    b.add_argument("path", metavar="PATH", help="the bundle directory or tar file")
    b.set_defaults(func=run_verify)


ARGUMENTS = {"bundle": bundle_arguments}
