"""Offline bundles in the stub world: `bundle` for this machine's target on a connected machine, then
`install --bundle` in a network namespace with no interface up (`unshare -n`), the venv equal to the lock;
a rerun that fetches nothing; a SIGKILL mid-bundle that resumes without fetching a finished file again;
`bundle verify` against a flipped byte; a bundle for another arch refused with exit 2."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest
from helpers.cli import assert_one_line_error, clean_env
from helpers.stack import ROW, installed, kill_group, lock_versions

from ascend_setup.bundle.tool import tool_requirements
from ascend_setup.host.machine import glibc_version
from ascend_setup.simulate.world import start_simulated_host
from ascend_setup.steps.pipeline import build_pipeline

PYTHON = "%d.%d" % sys.version_info[:2]


def _can_unshare() -> bool:
    return (
        shutil.which("unshare") is not None
        and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0
    )


needs_netns = pytest.mark.skipif(not _can_unshare(), reason="needs root for unshare -n (CI runs as root)")


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.host = start_simulated_host(root, ROW, tool_dependencies=True)
        self.home = root / "home"
        self.home.mkdir()

    def env(self) -> dict:
        return clean_env(self.home, {"STUB_BUILD_STAGES": "3", "STUB_STAGE_SECONDS": "0.1"})

    def bundle_argv(
        self, out: Path, *extra: str, arch: str = platform.machine(), glibc: str = glibc_version() or ""
    ) -> List[str]:
        return [
            sys.executable,
            "-m",
            "ascend_setup",
            "bundle",
            "--cann",
            "9.1.0",
            "--arch",
            arch,
            "--glibc",
            glibc,
            "--python",
            PYTHON,
            *self.host.index_args(),
            "--tool-index-url",
            self.host.tools.url,
            "-o",
            str(out),
            *extra,
        ]

    def bundle(self, out: Path, *extra: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.bundle_argv(out, *extra, **kw), capture_output=True, text=True, env=self.env(), timeout=600
        )

    def cli(self, *args: str, offline: bool = False, timeout: float = 900) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "ascend_setup", *args]
        return subprocess.run(
            ["unshare", "-n", *argv] if offline else argv,
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=timeout,
        )

    def install_args(self, workdir: Path, bundle: Path) -> List[str]:
        return [
            "install",
            "--cann",
            "9.1.0",
            "--bundle",
            str(bundle),
            "--cann-home",
            str(self.host.cann.root),
            "--workdir",
            str(workdir),
            "--python",
            sys.executable,
            "--yes",
        ]

    def requests(self) -> int:
        h = self.host
        return sum(len(i.requests) for i in (h.main, h.ascend, h.pytorch_cpu, h.tools)) + len(h.archives.requests)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = World(tmp_path_factory.mktemp("bundle-world"))
    yield w
    w.host.close()


@pytest.fixture(scope="module")
def made(world):
    """A bundle for this machine's target, made once."""
    out = world.root / "bundle"
    proc = world.bundle(out)
    assert proc.returncode == 0, proc.stderr
    return out


def _manifest(bundle: Path) -> dict:
    return json.loads((bundle / "manifest.json").read_text())


def test_bundle_holds_the_lock_the_build_inputs_and_the_tool(made):
    manifest = _manifest(made)
    assert manifest["target"] == {
        "arch": platform.machine(),
        "glibc": glibc_version(),
        "python": PYTHON,
        "device": "A2",
        "soc": None,
    }
    assert manifest["missing"] == [] and manifest["cann"] == "9.1.0"
    roles = {}
    for f in manifest["files"]:
        roles.setdefault(f["role"], []).append(f)
    lock = lock_versions_of(made)
    assert {f["package"] for f in roles["package"]} == set(lock)
    assert any(f["path"].endswith(".tar.gz") and f["package"] == "vllm-ascend" for f in roles["package"])
    assert len(roles["third-party"]) == 3  # json, abseil-cpp, makeself, as the stub sdist's CMake files name them
    assert [f["package"] for f in roles["tool"]] == ["ascend-setup"]
    deps = {f["package"] for f in roles["tool-dependency"]}
    wanted = {
        r.split(";")[0].split(">")[0].split("<")[0].split("=")[0].strip().lower().replace("_", "-")
        for r in tool_requirements()
    }
    assert wanted <= deps, wanted - deps
    uv = [f["path"] for f in roles["tool-dependency"] if f["package"] == "uv"]
    assert len(uv) == 1 and uv[0].endswith(f"_{platform.machine()}.whl"), uv  # uv for the target's platform only
    assert (made / "bootstrap.sh").stat().st_mode & 0o111


def lock_versions_of(bundle: Path) -> dict:
    from ascend_setup.resolve.lockfile import read_lock

    return {p.name: p.version for p in read_lock(bundle / "lock.txt").packages}


@needs_netns
def test_offline_install_from_the_bundle_equals_the_lock(world, made):
    workdir = world.root / "offline"
    before = world.requests()
    proc = world.cli(*world.install_args(workdir, made), offline=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert world.requests() == before  # and in a namespace with no network, nothing could have left anyway
    venv = installed(workdir / "venv")
    lock = lock_versions(workdir)
    assert {n: v for n, v in venv.items() if n in lock} == lock
    assert set(lock) <= set(venv)
    assert "skipped: the bundle" in (workdir / "logs" / "mirror.log").read_text()
    assert "--no-index --find-links" in (workdir / "logs" / "plugin-deps.log").read_text()
    status = json.loads(world.cli("status", "--workdir", str(workdir), "--json").stdout)
    assert all(s["state"] == "done" for s in status["steps"])
    again = world.cli(*world.install_args(workdir, made), offline=True)  # resume: all done, still offline
    assert again.returncode == 0 and again.stderr.count("(done)") == len(build_pipeline()), again.stderr
    audit = world.cli("audit", "--venv", str(workdir / "venv"), "--quiet-info", offline=True)
    assert audit.returncode == 0, audit.stdout


def test_a_second_run_fetches_nothing_and_prints_at_80_columns(world, made):
    before = world.requests()
    env = {**world.env(), "COLUMNS": "80"}
    proc = subprocess.run(world.bundle_argv(made), capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert world.requests() == before
    assert "continuing with the lock this bundle already holds" in proc.stderr
    assert all(len(line) <= 80 or " " not in line.strip() for line in proc.stdout.splitlines()), proc.stdout
    assert "files" in proc.stdout and "MB" in proc.stdout


def test_verify_names_a_flipped_byte_and_a_missing_file(world, made, tmp_path):
    ok = world.cli("bundle", "verify", str(made), "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["problems"] == []
    copy = tmp_path / "copy"
    shutil.copytree(made, copy)
    victim = next((copy / "files").glob("torch-*.whl"))
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01
    victim.write_bytes(bytes(data))
    gone = next((copy / "third-party").iterdir())
    gone.unlink()
    bad = world.cli("bundle", "verify", str(copy))
    assert bad.returncode == 1
    assert f"corrupt: files/{victim.name}" in bad.stdout and f"missing: third-party/{gone.name}" in bad.stdout
    assert bad.stdout.count("corrupt:") == 1 and bad.stdout.count("missing:") == 1
    assert_one_line_error(world.cli("bundle", "verify", str(tmp_path / "nothing-here")))
    (tmp_path / "empty").mkdir()
    assert_one_line_error(world.cli("bundle", "verify", str(tmp_path / "empty")))


def test_sigkill_mid_bundle_resumes_without_fetching_finished_files(world, tmp_path):
    out = tmp_path / "killed"
    main = world.host.main
    main.behaviour.bytes_per_second = 1_000_000  # the 3 MB sdist takes seconds: time to be killed mid-way
    try:
        proc = subprocess.Popen(
            world.bundle_argv(out),
            env=world.env(),
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 300
        part = None
        while time.monotonic() < deadline and proc.poll() is None:
            part = (
                next((p for p in (out / "files").glob("vllm_ascend-*.tar.gz.part") if p.stat().st_size > 100_000), None)
                if (out / "files").is_dir()
                else None
            )
            if part is not None:
                break
            time.sleep(0.05)
        assert part is not None, "the bundle never reached the sdist's download"
        kill_group(proc)
    finally:
        main.behaviour.bytes_per_second = None
    finished = [p.name for p in (out / "files").iterdir() if not p.name.endswith(".part")]
    assert finished and not (out / "manifest.json").exists()
    mark = len(main.requests)
    proc = world.bundle(out)
    assert proc.returncode == 0, proc.stderr
    asked = [(path, headers) for path, headers in main.requests[mark:] if path.startswith("/files/")]
    for name in finished:
        assert not any(path.endswith("/" + name) for path, _ in asked), name
    sdist = [headers for path, headers in asked if path.endswith(".tar.gz") and "vllm_ascend" in path]
    assert sdist and sdist[0].get("Range", "").startswith("bytes=") and sdist[0]["Range"] != "bytes=0-"
    assert world.cli("bundle", "verify", str(out)).returncode == 0


def test_a_bundle_for_another_arch_is_refused_before_anything_is_touched(world, tmp_path):
    other = "aarch64" if platform.machine() == "x86_64" else "x86_64"
    out = tmp_path / "other"
    proc = world.bundle(out, arch=other)
    assert proc.returncode == 0, proc.stderr
    uv = [f["path"] for f in _manifest(out)["files"] if f["package"] == "uv"]
    assert len(uv) == 1 and uv[0].endswith(f"_{other}.whl")
    workdir = tmp_path / "work"
    refused = world.cli(*world.install_args(workdir, out))
    line = assert_one_line_error(refused)
    assert f"was made for {other}" in line
    assert not workdir.exists()
    tar = tmp_path / "other.tar"
    assert world.bundle(tar, "--format", "tar", arch=other).returncode == 0
    assert tar.is_file() and not (tmp_path / "other.tar.parts").exists()
    assert world.cli("bundle", "verify", str(tar)).returncode == 0
    assert f"was made for {other}" in assert_one_line_error(world.cli(*world.install_args(workdir, tar)))
    assert not workdir.exists()


@needs_netns
def test_offline_install_from_a_tar(world, made, tmp_path):
    tar = tmp_path / "bundle.tar"
    assert world.bundle(tar, "--format", "tar").returncode == 0
    workdir = tmp_path / "from-tar"
    proc = world.cli(*world.install_args(workdir, tar), offline=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lock = lock_versions(workdir)
    venv = installed(workdir / "venv")
    assert {n: v for n, v in venv.items() if n in lock} == lock
    assert (workdir / "bundle" / "manifest.json").is_file()


def _play(world: World, inventory: Path, *extra: str, offline: bool = True) -> subprocess.CompletedProcess:
    tmp = world.root / "ansible-tmp"
    env = {
        **world.env(),
        "ANSIBLE_LOCAL_TEMP": str(tmp / "local"),
        "ANSIBLE_REMOTE_TEMP": str(tmp / "remote"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "LC_ALL": "C.UTF-8",
        "LANG": "C.UTF-8",
    }
    ansible = Path(__file__).resolve().parents[2] / "ansible"
    argv = [
        str(Path(sys.executable).parent / "ansible-playbook"),
        "-i",
        str(inventory),
        str(ansible / "install.yml"),
        *extra,
    ]
    return subprocess.run(
        ["unshare", "-n", *argv] if offline else argv, capture_output=True, text=True, env=env, timeout=1800
    )


@needs_netns
def test_a_fleet_installs_from_one_bundle_with_no_network(world, made, tmp_path):
    import yaml
    from helpers.ansible import recap

    hosts = ("node1", "node2")
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "ascend": {
                    "hosts": {h: {"ascend_workdir": str(tmp_path / h / "ascend-setup")} for h in hosts},
                    "vars": {
                        "ansible_connection": "local",
                        "ansible_python_interpreter": sys.executable,
                        "ascend_setup_command": [sys.executable, "-m", "ascend_setup"],
                        "ascend_cann_home": str(world.host.cann.root),
                        "ascend_python": sys.executable,
                    },
                }
            }
        )
    )
    before = world.requests()
    first = _play(world, inventory, "-e", f"ascend_bundle={made}")
    assert first.returncode == 0, first.stdout[-4000:]
    assert world.requests() == before
    for h in hosts:
        workdir = tmp_path / h / "ascend-setup"
        assert (workdir / "fleet" / "bundle" / "manifest.json").is_file()
        lock = lock_versions(workdir)
        venv = installed(workdir / "venv")
        assert {n: v for n, v in venv.items() if n in lock} == lock
    second = _play(world, inventory, "-e", f"ascend_bundle={made}")
    assert second.returncode == 0, second.stdout[-4000:]
    assert all(r["changed"] == 0 for r in recap(second).values()), second.stdout[-3000:]


@needs_netns
def test_bootstrap_installs_the_tool_from_the_bundle_then_the_stack_with_no_network(world, made, tmp_path):
    work = tmp_path / "work"
    env = {k: v for k, v in world.env().items() if k != "PYTHONPATH"}  # the tool must come from the bundle
    env.update({"ASCEND_SETUP_WORKDIR": str(work), "PYTHON": sys.executable})
    argv = [
        "unshare",
        "-n",
        "sh",
        str(made / "bootstrap.sh"),
        "--cann-home",
        str(world.host.cann.root),
        "--python",
        sys.executable,
        "--json",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["ok"] is True
    tool = work / "tool-venv"
    shown = subprocess.run(
        [str(tool / "bin" / "python"), "-m", "pip", "show", "-f", "ascend-setup"],
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    assert "Location: " + str(tool) in shown and "__editable__" not in shown  # the bundle's wheel, not this checkout
    lock = lock_versions(work)
    assert {n: v for n, v in installed(work / "venv").items() if n in lock} == lock
    broken = tmp_path / "broken"
    shutil.copytree(made, broken)
    victim = next((broken / "tool").glob("ascend_setup-*.whl"))
    victim.write_bytes(victim.read_bytes()[:-1] + bytes([victim.read_bytes()[-1] ^ 1]))
    env["ASCEND_SETUP_WORKDIR"] = str(tmp_path / "work2")
    refused = subprocess.run(
        ["unshare", "-n", "sh", str(broken / "bootstrap.sh")], capture_output=True, text=True, env=env, timeout=300
    )
    assert refused.returncode == 1 and "do not match their sha256" in refused.stderr
    assert not (tmp_path / "work2" / "tool-venv").exists()


@needs_netns
def test_a_bundle_with_python_gives_an_offline_host_a_managed_interpreter(world, made, tmp_path):
    """`--with-python` carries the target's pinned CPython (here a loopback release of this machine's) and a
    builds file naming it; a host given no usable interpreter (`--python managed`) installs from the bundle in a
    namespace with no network, the venv made from the managed interpreter in the workdir."""
    from helpers.python_releases import BUILD, ReleaseServer, pbs_archive, write_builds_file

    archive, version, sha256 = pbs_archive(tmp_path / "pbs")
    server = ReleaseServer({f"{BUILD}/{archive.name}": archive.read_bytes()})
    try:
        builds = write_builds_file(tmp_path / "builds.json", archive, version, sha256, [server.url])
        out = tmp_path / "bundle"
        shutil.copytree(made, out)  # a rerun continues a bundle: only the interpreter is fetched
        proc = world.bundle(out, "--with-python", "--python-builds", str(builds))
        assert proc.returncode == 0, proc.stderr[-3000:]
    finally:
        server.close()
    roles = [f for f in _manifest(out)["files"] if f["role"] == "python"]
    assert sorted(Path(f["path"]).name for f in roles) == sorted([archive.name, "builds.json"])
    workdir = tmp_path / "w"
    args = world.install_args(workdir, out)
    at = args.index("--python")
    args[at + 1] = "managed"
    done = world.cli(*args, offline=True)
    assert done.returncode == 0, done.stderr[-3000:]
    (python,) = (workdir / "python").glob(f"cpython-{version}-*/bin/python{version.rsplit('.', 1)[0]}")
    assert f"home = {python.parent}" in (workdir / "venv" / "pyvenv.cfg").read_text()
    assert "mirror " not in (workdir / "logs" / "python.log").read_text()  # no mirror was asked
