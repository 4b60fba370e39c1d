"""`ascend-setup bundle` and `bundle verify`: an offline bundle for a target, made on any connected machine;
its check against its manifest."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Type

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from ascend_setup.cli import flags, values
from ascend_setup.cli.command import LazyOptions, Result
from ascend_setup.errors import BadInput

if TYPE_CHECKING:
    from rich.console import Console

    from ascend_setup.bundle.manifest import Manifest, Missing
    from ascend_setup.cli.render import Output
    from ascend_setup.commands.bundle_options import BundleCommandOptions
    from ascend_setup.index.tags import Target
    from ascend_setup.matrix.models import Row


class RoleCount(BaseModel):
    model_config = ConfigDict(extra="forbid")

    files: int
    bytes: int


class BundleDocument(BaseModel):
    """`bundle --json` and `bundle verify --json`: the manifest's summary; `problems` when it was checked."""

    model_config = ConfigDict(extra="forbid")

    bundle: str
    ok: bool
    cann: str
    target: Dict[str, Any]
    tool_version: str
    created: str
    size: int
    files: int
    roles: Dict[str, RoleCount]
    missing: List[Dict[str, Any]]
    problems: Optional[List[str]] = None  # only when the bundle was checked (verify, a finished tar)

    @model_serializer(mode="wrap")
    def _without_unchecked(self, dump: SerializerFunctionWrapHandler) -> Dict[str, Any]:
        data: Dict[str, Any] = dump(self)
        if self.problems is None:
            data.pop("problems", None)
        return data


DOCUMENTS: Dict[str, Type[BaseModel]] = {"bundle": BundleDocument, "bundle verify": BundleDocument}


def manifest_document(manifest: Manifest, path: Path, problems: Optional[List[str]] = None) -> BundleDocument:
    roles: Dict[str, RoleCount] = {}
    for f in manifest.files:
        role = roles.setdefault(f.role, RoleCount(files=0, bytes=0))
        roles[f.role] = RoleCount(files=role.files + 1, bytes=role.bytes + f.size)
    return BundleDocument(
        bundle=str(path),
        ok=not manifest.missing and not problems,
        cann=manifest.cann,
        target=manifest.target.model_dump(),
        tool_version=manifest.tool_version,
        created=manifest.created,
        size=manifest.size,
        files=len(manifest.files),
        roles=roles,
        missing=[m.model_dump() for m in manifest.missing],
        problems=problems,
    )


def missing_text(m: Missing) -> str:
    return f"{m.package}{' ' + m.version if m.version else ''}: {m.reason}"


def render_summary(out: Console, manifest: Manifest, path: Path) -> None:
    """The size and what the bundle holds, one role a line, then each file it could not get."""
    from ascend_setup.cli.progress import size_text
    from ascend_setup.cli.render import print_field, print_prose

    t = manifest.target
    npus = t.soc or t.device
    print_prose(
        out,
        f"bundle {path}: CANN {manifest.cann} for {t.arch} / glibc {t.glibc} / Python {t.python}"
        f"{' / ' + npus if npus else ''}, {len(manifest.files)} files, "
        f"{size_text(manifest.size)}",
    )
    for role, info in manifest_document(manifest, path).roles.items():
        print_field(out, role, f"{info.files} files, {size_text(info.bytes)}")
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


def run(options: BundleCommandOptions, output: Output) -> Result:
    from ascend_setup.bundle.bundle_request import prepare
    from ascend_setup.bundle.make import make_bundle, open_out_dir, staging_dir, write_tar
    from ascend_setup.cli.progress import TransferProgress
    from ascend_setup.cli.render import stderr_console

    if options.bundle_command == "verify":
        return run_verify(Path(options.path or ""))
    err = stderr_console()
    prepared = prepare(options, lambda line: err.print(line, soft_wrap=True, markup=False))
    out = prepared.out
    if options.format == "tar" and out.is_file() and not staging_dir(out).exists():
        return finished_tar(out, prepared.row, prepared.target)
    directory = open_out_dir(staging_dir(out) if options.format == "tar" else out)

    def say(line: str) -> None:
        err.print(line, soft_wrap=True, markup=False, highlight=False)

    manifest = make_bundle(
        prepared.request(directory),
        prepared.index,
        lambda files, total: TransferProgress(err, "bundle", files, total),
        say,
    )
    path = directory
    if options.format == "tar" and not manifest.missing:
        path = write_tar(directory, out)
        shutil.rmtree(directory)  # ours: the tar holds it all now
    return Result(
        1 if manifest.missing else 0,
        manifest_document(manifest, path),
        lambda console: render_summary(console, manifest, path),
    )


def finished_tar(out: Path, row: Row, target: Target) -> Result:
    """A rerun of a bundle whose tar is made: checked and shown, not made again (another target's is refused)."""
    from ascend_setup.bundle.manifest import verify_bundle
    from ascend_setup.cli.render import print_prose

    manifest, problems = verify_bundle(out, "-o")
    t = manifest.target
    if (manifest.cann, t.arch, t.glibc, t.python) != (row.cann, target.arch, target.glibc, target.python):
        raise BadInput(
            f"-o {out} is a bundle of CANN {manifest.cann} for {t.arch} / glibc {t.glibc} / Python {t.python} already",
            hint="give another -o for this target",
        )

    def render(console: Console) -> None:
        render_summary(console, manifest, out)
        for line in problems:
            print_prose(console, line, "    ", first="  ")

    return Result(1 if problems or manifest.missing else 0, manifest_document(manifest, out, problems), render)


def run_verify(path: Path) -> Result:
    from ascend_setup.bundle.manifest import verify_bundle
    from ascend_setup.cli.progress import size_text
    from ascend_setup.cli.render import print_prose

    path = path.expanduser().absolute()
    manifest, problems = verify_bundle(path)

    def render(out: Console) -> None:
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

    return Result(1 if problems or manifest.missing else 0, manifest_document(manifest, path, problems), render)


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
        type=values.npus,
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
        type=values.index_url("--tool-index-url"),
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
    p.set_defaults(func=run, options=LazyOptions("ascend_setup.commands.bundle_options:BundleCommandOptions"))
    sub = p.add_subparsers(dest="bundle_command", metavar="verify")
    b = sub.add_parser(
        "verify", help="check a bundle's manifest and every file's sha256; exit 1 names each missing or corrupt file"
    )
    flags.common(b)
    b.add_argument("path", metavar="PATH", help="the bundle directory or tar file")
    b.set_defaults(func=run, options=LazyOptions("ascend_setup.commands.bundle_options:BundleCommandOptions"))


ARGUMENTS = {"bundle": bundle_arguments}
