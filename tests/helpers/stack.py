"""The simulated host under a test install: its indexes, its fake CANN, and what a venv and a lock hold."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from packaging.utils import canonicalize_name

from ascend_setup.matrix import load_matrix
from ascend_setup.simulate.fake_cann import FakeCann
from ascend_setup.simulate.index_server import Behaviour, LocalIndex
from ascend_setup.simulate.world import SimulatedHost, start_simulated_host
from helpers.cli import clean_env

ROW = load_matrix().rows["9.1.0"]


@dataclass
class Stack:
    host: SimulatedHost
    main: LocalIndex
    ascend: LocalIndex
    pytorch_cpu: LocalIndex
    cann: FakeCann
    root: Path
    home: Path

    def install_argv(self, workdir: Path, *extra: str) -> List[str]:
        """The install against this stack; an `--index NAME=URL` in `extra` replaces the stack's index of that
        name (the tool refuses one name given two URLs)."""
        return [
            sys.executable,
            "-m",
            "ascend_setup",
            "install",
            "--cann",
            "9.1.0",
            "--cann-home",
            str(self.cann.root),
            *self.index_args(but=named_indexes(extra)),
            "--mirror",
            "none",
            "--yes",
            "--workdir",
            str(workdir),
            "--python",
            sys.executable,
            *extra,
        ]

    def env(self, **extra: str) -> dict:
        return clean_env(self.home, {"STUB_BUILD_STAGES": "6", "STUB_STAGE_SECONDS": "0.3", **extra})

    def install(
        self,
        workdir: Path,
        *extra: str,
        timeout: float = 900,
        env: Optional[dict] = None,
        argv: Optional[List[str]] = None,
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            argv or self.install_argv(workdir, *extra),
            capture_output=True,
            text=True,
            env=self.env(**(env or {})),
            timeout=timeout,
        )

    def spawn(self, workdir: Path, *extra: str) -> subprocess.Popen:
        """A background install in its own process group; its stderr goes to a file (`proc.stderr_path`)."""
        err = self.root / f"stderr-{os.getpid()}-{len(list(self.root.glob('stderr-*')))}.txt"
        with err.open("w") as handle:
            proc = subprocess.Popen(
                self.install_argv(workdir, *extra),
                env=self.env(),
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=handle,
            )
        proc.stderr_path = err  # type: ignore[attr-defined]
        return proc

    def close(self) -> None:
        self.host.close()

    def cli(self, *args: str, env: Optional[dict] = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "ascend_setup", *args],
            capture_output=True,
            text=True,
            env=self.env(**(env or {})),
            timeout=300,
        )

    def index_args(self, but: Sequence[str] = ()) -> List[str]:
        """The stack's index flags, less the named indexes in `but`."""
        args = self.host.index_args()
        pairs = [args[i : i + 2] for i in range(0, len(args), 2)]
        return [a for pair in pairs if not (pair[0] == "--index" and pair[1].split("=")[0] in but) for a in pair]


def named_indexes(argv: Sequence[str]) -> List[str]:
    """The names an argument list gives `--index NAME=URL` for."""
    return [argv[i + 1].split("=")[0] for i, a in enumerate(argv[:-1]) if a == "--index"]


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=60)


def installed(venv: Path) -> dict:
    """name -> version of every distribution in the venv, as pip lists it."""
    env = {k: v for k, v in clean_env(venv.parent).items() if k != "PYTHONPATH"}  # the repo is not in the venv
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    return {canonicalize_name(d["name"]): d["version"] for d in json.loads(out)}


def lock_versions(workdir: Path) -> dict:
    """name -> version of every package of the workdir's lock."""
    from ascend_setup.resolve.lockfile import read_lock

    (path,) = (workdir / "lock").glob("*.txt")
    return {p.name: p.version for p in read_lock(path).packages}


def freeze(venv: Path) -> List[str]:
    """pip freeze, with a local wheel's path reduced to its file name (workdirs differ between runs)."""
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "freeze", "--all"],
        capture_output=True,
        text=True,
        env=clean_env(venv.parent),
        check=True,
    ).stdout
    lines = []
    for line in out.splitlines():
        if " @ file://" in line:
            name, _, url = line.partition(" @ ")
            line = f"{name} @ {url.split('#')[0].rsplit('/', 1)[-1]}"
        if line.strip():
            lines.append(line)
    return sorted(lines)


def status(stack: Stack, workdir: Path) -> dict:
    return json.loads(stack.cli("status", "--workdir", str(workdir), "--json").stdout)


def _stack(
    tmp_path_factory,
    *,
    plugin_wheel_arches=("aarch64",),
    plugin_wheel_glibc: str = "2.34",
    behaviour: Optional[Behaviour] = None,
    tool_dependencies: bool = False,
    tls: Optional[Tuple[Path, Path]] = None,
) -> Stack:
    """`tls`: every server of the stack answers HTTPS with this (certificate chain, key)."""
    root = tmp_path_factory.mktemp("stack")
    host = start_simulated_host(
        root,
        ROW,
        plugin_wheel_arches=plugin_wheel_arches,
        plugin_wheel_glibc=plugin_wheel_glibc,
        behaviour=behaviour,
        tool_dependencies=tool_dependencies,
        tls=tls,
    )
    home = root / "home"
    home.mkdir()
    return Stack(
        host=host,
        main=host.main,
        ascend=host.ascend,
        pytorch_cpu=host.pytorch_cpu,
        cann=host.cann,
        root=root,
        home=home,
    )
