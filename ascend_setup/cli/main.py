"""The front door: parse, call one function, map errors to exit codes. No logic lives here."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Callable, List, NoReturn, Optional

from ascend_setup import __version__
from ascend_setup.errors import EXIT_BAD_INPUT, AscendSetupError
from ascend_setup.cli import flags
from ascend_setup.utils import tempdirs
from ascend_setup.utils.interrupts import at_interrupt, install_handlers


#: Set from the command line before parsing: a --json run gets its errors as JSON on stdout too.
_json_errors = False


def error_json(message: str, hint: Optional[str], code: int) -> None:
    """`{"error", "hint", "exit"}` on stdout: what a --json caller reads when a command fails."""
    import json

    sys.stdout.write(json.dumps({"error": message, "hint": hint, "exit": code}, indent=2) + "\n")
    sys.stdout.flush()


class OneLineParser(argparse.ArgumentParser):
    """Bad flags get one line on stderr and exit 2, not a usage dump."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        if _json_errors:
            error_json(message, f"see {self.prog} --help", EXIT_BAD_INPUT)
        raise SystemExit(EXIT_BAD_INPUT)


def _common(json_flag: bool = True) -> OneLineParser:
    parent = OneLineParser(add_help=False)  # of the subparsers' class, as add_parser(parents=) types it
    parent.add_argument("--matrix", metavar="FILE", help="compatibility matrix to use (env ASCEND_SETUP_MATRIX)")
    if json_flag:
        parent.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    return parent


def _index_flags(p: argparse.ArgumentParser) -> None:
    flags.index(p, "replace a named index of the row (ascend, pytorch-cpu), e.g. with a mirror of it; repeatable")
    p.add_argument("--respect-pip-config", action="store_true",
                   help="let your pip configuration (constraint, find-links, extra-index-url, ...) apply; by default "
                        "only its index and network settings do")


def _hub_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", choices=["modelscope", "huggingface"],
                   help="the hub for a model id (default: ModelScope, then Hugging Face)")
    p.add_argument("--revision", metavar="R", help="branch, tag or commit (default: master on ModelScope, main on HF)")
    p.add_argument("--endpoint", metavar="URL", help="the hub's address, e.g. a mirror (default: MODELSCOPE_DOMAIN "
                   "or HF_ENDPOINT, else the hub's own); needs --source")
    p.add_argument("--refresh", action="store_true", help="ask the hub again even when this revision is cached")


def _lazy(target: str) -> Callable[[argparse.Namespace], int]:
    """Import a command's module only when it runs: start-up stays fast (audit must be quick)."""

    def call(args: argparse.Namespace) -> int:
        module, func = target.split(":")
        return getattr(importlib.import_module(f"ascend_setup.commands.{module}"), func)(args)

    return call


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="ascend-setup", description="Take an Ascend host to a working vLLM-Ascend "
                           "environment, resumably; audit one someone else built.")
    parser.add_argument("--version", action="version", version=f"ascend-setup {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    common = _common()

    p = sub.add_parser("install", parents=[common], help="run (or resume) the install pipeline")
    flags.cann(p, required=True)
    flags.venv(p, "venv to build (default <workdir>/venv)")
    flags.workdir(p, "state, logs, downloads, build tree")
    flags.python(p, "interpreter for the venv")
    flags.cann_home(p, "CANN root, e.g. /usr/local/Ascend")
    flags.index_url(p)
    flags.extra_index_url(p, "another index beside the mirror, for anything the row does not assign (repeatable)")
    _index_flags(p)
    flags.lock(p, "install this lock (from 'plan --lock') instead of resolving here")
    p.add_argument("--bundle", metavar="PATH", help="install from this offline bundle (a directory or tar from "
                   "'ascend-setup bundle'): no index is asked; a bundle for another target, row or SOC is refused")
    flags.vllm_ascend(p)
    p.add_argument("--mirror", metavar="auto|none|URL", help="pick the fastest fresh mirror, use none, or use URL")
    flags.installer(p)
    flags.soc(p, "build target, e.g. ascend910b3 (default: from npu-smi)")
    p.add_argument("--jobs", type=int, metavar="N", help="MAX_JOBS for a vllm-ascend source build (default: from the "
                   "memory the build can use, 4 GiB a job)")
    flags.build_deps_url(p)
    p.add_argument("--force", action="store_true", help="proceed although the installed CANN differs from the row")
    p.add_argument("--adopt-venv", action="store_true", help="install into an existing venv that ascend-setup did not "
                   "make (it says what it will change; it never deletes it)")
    flags.dry_run(p, "print the plan of steps; touch nothing")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    flags.resume_on_login(p, "add a block to ~/.bashrc that resumes this install at the next login after a stop "
                          "(removed when the install completes); --no-resume-on-login removes it")
    p.set_defaults(func=_lazy("install:run_install"))

    p = sub.add_parser("resume", parents=[_common(json_flag=True)], help="resume the last install with its options")
    flags.workdir(p, "the workdir whose install to resume; a copied one resumes in place")
    flags.dry_run(p, "print what the resumed run would do; touch nothing")
    p.add_argument("--on-login", action="store_true", help="what the ~/.bashrc block runs: if the install is not "
                   "done and not running, say so and resume it in the background")
    p.set_defaults(func=_lazy("install:run_resume"))

    p = sub.add_parser("status", parents=[common],
                       help="each step: done/running/interrupted/failed/pending, times, log")
    flags.workdir(p, "the workdir to report on, read only")
    p.set_defaults(func=_lazy("install:run_status"))

    p = sub.add_parser("plan", parents=[common], help="forecast wheel / source build / unavailable for a target")
    flags.cann(p, required=True)
    flags.target(p)
    flags.python(p, "target Python, e.g. 3.11, or an interpreter (default: the one install would pick, by the wheels "
                 "the row publishes)", metavar="X.Y|EXE")
    flags.index_url(p, "primary index (default: pip's configuration)")
    flags.extra_index_url(p, "another index beside the primary one, for anything the row does not assign (repeatable)")
    _index_flags(p)
    flags.lock(p, "write the resolved lock for this target to FILE")
    flags.soc(p, "the target's NPUs: A2, A3, 310P, A5 or a SOC_VERSION such as ascend910_9391; a published "
              "vllm-ascend wheel is taken only for the device type it was built for (default A2, the public wheels' "
              "type)", metavar="DEVICE|SOC_VERSION", default="A2")
    flags.vllm_ascend(p)
    p.set_defaults(func=_lazy("plan:run"))

    p = sub.add_parser("bundle", parents=[common], help="every file an offline install of a target needs, in one "
                       "directory or tar (made on any connected machine); 'bundle verify PATH' checks one")
    flags.cann(p)
    flags.target(p)
    p.add_argument("--python", metavar="X.Y", help="target Python, e.g. 3.11 (default: as plan picks it)")
    flags.soc(p, "the target's NPUs: A2, A3, 310P, A5 or a SOC_VERSION such as ascend910b3 (default A2); install "
              "refuses the bundle on other NPUs", metavar="DEVICE|SOC_VERSION", default="A2")
    flags.lock(p, "bundle this lock (from 'plan --lock') instead of resolving")
    p.add_argument("--wheelhouse", metavar="DIR", help="take a built vllm-ascend wheel from DIR/<key>/ (an install's "
                   "<workdir>/wheelhouse) whose key matches the target; needs --soc SOC_VERSION")
    flags.index_url(p, "primary index (default: pip's configuration)")
    flags.extra_index_url(p, "another index beside the primary one, for anything the row does not assign (repeatable)")
    _index_flags(p)
    flags.vllm_ascend(p)
    flags.build_deps_url(p)
    p.add_argument("--tool-index-url", metavar="URL", help="the index the tool's own dependencies come from "
                   "(default: the primary index)")
    p.add_argument("-o", "--out", metavar="PATH", help="the bundle: a directory (a rerun continues it), or with "
                   "--format tar the tar file")
    p.add_argument("--format", choices=["dir", "tar"], default="dir", help="a directory (default) or one tar file")
    p.set_defaults(func=_lazy("bundle:run"))
    bsub = p.add_subparsers(dest="bundle_command", metavar="verify")
    b = bsub.add_parser("verify", parents=[common], help="check a bundle's manifest and every file's sha256; exit 1 "
                        "names each missing or corrupt file")
    b.add_argument("path", metavar="PATH", help="the bundle directory or tar file")
    b.set_defaults(func=_lazy("bundle:run_verify"))

    p = sub.add_parser("audit", parents=[common], help="read-only check of a venv against a row")
    flags.venv(p, "the venv to audit", env=False, required=True)
    p.add_argument("--deep", action="store_true", help="also check every installed file against its "
                   "distribution's RECORD (size; sha256 for small files): what an interrupted install left")
    flags.cann(p, "row to check against (default: inferred from vllm-ascend / torch-npu)")
    flags.lock(p, "also report drift against this lock (default: the lock ascend-setup installed this venv from, "
               "when it built it)")
    flags.index(p, "the URL of a named index (ascend, pytorch-cpu) the fix plan installs from; repeatable")
    flags.soc(p, "this host's NPUs, checked against the device type vllm_ascend was built for (default: from npu-smi)")
    p.add_argument("--quiet-info", action="store_true", help="count the expected notes (info) but do not list them")
    p.set_defaults(func=_lazy("audit:run"))

    p = sub.add_parser("mirrors", parents=[common], help="rank package indexes: freshness, then throughput")
    flags.cann(p, "row whose pins gate freshness (default: the installed CANN's, else the newest)")
    p.add_argument("--candidate", metavar="URL", action="append", help="another index to rank (repeatable)")
    p.add_argument("--only", action="store_true", help="rank just the --candidate URLs")
    p.add_argument("--budget", type=float, default=5.0, metavar="SECONDS", help="overall time budget (default 5)")
    p.add_argument("--apply", action="store_true", help="write the choice into --venv (or --global)")
    flags.venv(p, "the venv whose pip.conf/uv.toml --apply writes", env=False)
    p.add_argument("--global", dest="global_", action="store_true", help="with --apply: your user pip config")
    flags.workdir(p, "where the ranking is cached for install")
    flags.python(p, "the Python the install will use: the sample is the row's largest wheel for it (default: this "
                 "interpreter when the row takes it, else 3.11)", metavar="X.Y|EXE")
    _index_flags(p)
    p.set_defaults(func=_lazy("mirrors:run"))

    p = sub.add_parser("doctor", parents=[common], help="host checks with fixes")
    flags.cann(p, "row to check against (default: the installed CANN's, else the newest)")
    flags.cann_home(p, "CANN root to check")
    flags.workdir(p, "workdir whose disk and locks to check")
    flags.venv(p, "venv to check for system site-packages")
    flags.python(p, "check this interpreter instead of searching")
    flags.soc(p, "the build target install would get (default: from npu-smi)")
    flags.vllm_ascend(p)
    flags.index_url(p, "primary index the install would use, asked which Pythons the row's wheels exist for "
                    "(default: pip's configuration)")
    _index_flags(p)
    p.set_defaults(func=_lazy("doctor:run"))

    p = sub.add_parser("demo", parents=[common], help="the whole main job on any machine, against a simulated "
                       "Ascend host (loopback indexes, a fake CANN); stopped partway and resumed, then audited")
    flags.workdir(p, "a new or empty directory to run in, kept afterwards (default: a temporary one, removed)",
                  env=False)
    p.add_argument("--keep", action="store_true", help="keep the temporary workdir (its logs, venv and lock)")
    p.add_argument("--interrupt-at", metavar="STEP", default="download",
                   help="where to SIGKILL the install before resuming it: 'download' (the middle of the vllm-ascend "
                        "sdist download, the default), a step name (not mirror or verify: over too soon), or 'none'")
    flags.installer(p)
    p.set_defaults(func=_lazy("demo:run"))

    p = sub.add_parser("fit", parents=[common], help="will MODEL fit a card, and how fast will it decode (reads "
                       "config.json and safetensors headers only)")
    p.add_argument("model", metavar="MODEL", help="a model directory (config.json, *.safetensors), its config.json, "
                   "or a hub id (Qwen/Qwen3-8B: reads its small files and safetensors headers, never its weights)")
    flags.fit_flags(p)
    _hub_flags(p)
    p.set_defaults(func=_lazy("fit:run_fit"))

    p = sub.add_parser("model", help="models on a hub: fetch one to persistent disk, resumably")
    msub_model = p.add_subparsers(dest="model_command", metavar="fetch")
    msub_model.required = True
    p = msub_model.add_parser("fetch", parents=[common], help="download MODEL_ID (after fit says it fits), resumable "
                              "after a stop, each file checked against the hub's sha256")
    p.add_argument("model", metavar="MODEL_ID", help="a hub id, e.g. Qwen/Qwen3-8B")
    p.add_argument("--to", metavar="DIR", help="where (default /mnt/workspace/models/<id>, else models/<id> beside "
                   "the workdir)")
    p.add_argument("--include", metavar="GLOB", action="append", help="only files matching GLOB (repeatable; the "
                   "fit's small files are always fetched)")
    p.add_argument("--force", action="store_true", help="download even when fit refuses (does not fit, or a blocker)")
    flags.fit_flags(p)
    flags.resume_on_login(p, "if stopped, continue at the next login (a guarded block in ~/.bashrc, removed when done)")
    p.add_argument("--on-login", action="store_true", help=argparse.SUPPRESS)
    _hub_flags(p)
    p.set_defaults(func=_lazy("model:run_fetch"))

    p = sub.add_parser("probe", parents=[common], help="measure HBM copy bandwidth in the installed venv "
                       "(2 GiB fp16, 3 warm-up + 20 timed copies); fit uses the result")
    flags.venv(p, "the installed venv (default <workdir>/venv)")
    p.add_argument("--device", default="npu:0", help="npu:N, or cpu to run the same code path without an NPU")
    p.add_argument("--gib", type=float, default=2.0, help="tensor size in GiB (default 2)")
    flags.cann_home(p, "CANN root for the NPU's environment")
    flags.workdir(p, "where probe.json is written")
    p.set_defaults(func=_lazy("fit:run_probe_command"))

    p = sub.add_parser("matrix", help="the compatibility matrix")
    msub = p.add_subparsers(dest="matrix_command", metavar="list|show|validate|derive|check")
    msub.required = True
    m = msub.add_parser("list", parents=[common], help="known rows")
    m.set_defaults(func=_lazy("matrix:run_list"))
    m = msub.add_parser("show", parents=[common], help="one whole row")
    m.add_argument("cann", metavar="CANN", help="the row's CANN version, e.g. 9.1.0")
    m.set_defaults(func=_lazy("matrix:run_show"))
    m = msub.add_parser("validate", parents=[common], help="check a matrix file")
    m.add_argument("file", nargs="?", metavar="FILE", help="the matrix file to check (default: the one in use)")
    m.set_defaults(func=_lazy("matrix:run_validate"))
    m = msub.add_parser("derive", parents=[common], help="a row read from vllm-ascend's, torch-npu's and vllm's own "
                        "metadata on the indexes")
    flags.vllm_ascend(m, "the vllm-ascend release, e.g. 0.23.0", required=True)
    flags.cann(m, "the CANN version it pairs with (no metadata says it)", required=True)
    flags.index_url(m, "the PyPI index to read (default: pip's configuration)")
    flags.index(m)
    m.add_argument("--into", metavar="FILE", help="add the row to this matrix file, or replace that CANN's row in it")
    m.set_defaults(func=_lazy("matrix:run_derive"))
    m = msub.add_parser("check", parents=[common], help="each row's internal consistency; with --live, against the "
                        "packages' real metadata")
    m.add_argument("file", nargs="?", metavar="FILE", help="the matrix file to check (default: the one in use)")
    m.add_argument("--live", action="store_true",
                   help="compare every row's pins, indexes and wheel_glibc with the indexes")
    m.add_argument("--pre", action="store_true",
                   help="with --live: list newer pre-releases too (default: finals, posts)")
    m.add_argument("--strict", action="store_true",
                   help="exit 1 when a newer release exists (default: it is information)")
    m.add_argument("--sdist", metavar="FILE", action="append", help="a vllm-ascend sdist a row pins: flag hints whose "
                   "environment variables its source no longer reads (repeatable)")
    flags.index_url(m, "the PyPI index to read (default: pip's configuration)")
    flags.index(m)
    m.set_defaults(func=_lazy("matrix:run_check"))

    p = sub.add_parser("fleet", help="many hosts: the report of the Ansible audit play (ansible/audit.yml)")
    fsub = p.add_subparsers(dest="fleet_command", metavar="report")
    fsub.required = True
    f = fsub.add_parser("report", parents=[common], help="one hosts x findings table of the audit play's per-host "
                        "results; exit 1 when a host is not clean")
    f.add_argument("results", metavar="DIR", help="the directory of <host>.audit.json files the audit play wrote")
    f.add_argument("--out", metavar="FILE", help="where the merged JSON report goes (default DIR/report.json)")
    f.set_defaults(func=_lazy("fleet:run_report"))

    p = sub.add_parser("triage", parents=[common], help="the root cause of a log (a step log, a pip install, a vllm "
                       "serve crash) and its fix; exit 0 found, 1 none known, 2 bad input")
    p.add_argument("file", metavar="FILE", help="the log to read, or - for standard input")
    p.set_defaults(func=_lazy("triage:run"))
    return parser


#: Commands a stop interrupts in the middle of work that the next run picks up.
RESUMABLE = ("install", "resume")


def refuse_empty_values(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """`--workdir ''` and the like: an empty value is never what the user meant."""
    for name, value in vars(args).items():
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and not v.strip() for v in values):
            flag = "FILE" if name == "file" else "--" + name.rstrip("_").replace("_", "-")
            parser.error(f"{flag} was given an empty value")


def main(argv: Optional[List[str]] = None) -> int:
    global _json_errors
    _json_errors = "--json" in (sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    refuse_empty_values(parser, args)
    install_handlers("run the same command again to resume" if args.command in RESUMABLE else None)
    at_interrupt(tempdirs.leave)
    tempdirs.enter()
    try:
        return int(args.func(args))
    except AscendSetupError as exc:
        if exc.details:
            sys.stderr.write(exc.details.rstrip() + "\n")
        sys.stderr.write(exc.one_line() + "\n")
        render = sys.modules.get("ascend_setup.cli.render")
        if getattr(args, "json", False) and not getattr(render, "json_printed", False):
            error_json(exc.message, exc.hint, exc.exit_code)
        return exc.exit_code
    finally:
        tempdirs.leave()


if __name__ == "__main__":
    raise SystemExit(main())
