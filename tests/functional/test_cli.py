"""The command contract: bad flags and paths give one line and exit 2; dry-run touches nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import assert_one_line_error, clean_env


@pytest.mark.parametrize(
    "args",
    [
        ["install"],
        ["install", "--cann", "9.1.0", "--bogus"],
        ["install", "--cann", "9.1.0", "--installer", "conda"],
        ["frobnicate"],
        ["matrix"],
        ["status", "--json", "extra"],
    ],
)
def test_bad_flags(cli, args) -> None:
    assert_one_line_error(cli(*args))


def test_bad_paths(cli, tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    cases = [
        (["install", "--cann", "9.1.0", "--workdir", str(a_file), "--dry-run"], "not a directory"),
        (["install", "--cann", "9.1.0", "--workdir", str(a_file / "sub"), "--dry-run"], "not a directory"),
        (
            ["install", "--cann", "9.1.0", "--venv", str(a_file), "--workdir", str(tmp_path / "w"), "--dry-run"],
            "not a directory",
        ),
        (
            [
                "install",
                "--cann",
                "9.1.0",
                "--cann-home",
                str(tmp_path / "none"),
                "--workdir",
                str(tmp_path / "w"),
                "--dry-run",
            ],
            "is not a directory",
        ),
        (
            [
                "install",
                "--cann",
                "9.1.0",
                "--python",
                str(tmp_path / "py"),
                "--workdir",
                str(tmp_path / "w"),
                "--dry-run",
            ],
            "does not exist",
        ),
        (
            ["install", "--cann", "9.1.0", "--index-url", "ftp://x", "--workdir", str(tmp_path / "w"), "--dry-run"],
            "not an http(s)",
        ),
        (
            ["install", "--cann", "9.1.0", "--mirror", "fast", "--workdir", str(tmp_path / "w"), "--dry-run"],
            "not an http(s)",
        ),
        (["status", "--workdir", str(a_file)], "not a directory"),
        (["resume", "--workdir", str(tmp_path / "nothing-here")], "does not exist"),
        (["resume", "--workdir", str(tmp_path)], "nothing to resume"),
        (["status", "--workdir", str(tmp_path / "nothing-here")], "does not exist"),
    ]
    for args, words in cases:
        assert words in assert_one_line_error(cli(*args)), args
    assert a_file.read_text() == "x"


def test_env_var_paths_are_checked_too(cli, tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    line = assert_one_line_error(cli("status", env={"ASCEND_SETUP_WORKDIR": str(a_file)}))
    assert str(a_file) in line


def test_dry_run_touches_nothing_and_status_json(cli, tmp_path: Path) -> None:
    workdir = tmp_path / "wd"
    dead = "http://127.0.0.1:9/simple/"  # refused: the closure preview says it cannot resolve, in an instant
    proc = cli(
        "install",
        "--cann",
        "9.1.0",
        "--workdir",
        str(workdir),
        "--dry-run",
        "--json",
        "--index-url",
        dead,
        "--index",
        f"ascend={dead}",
        "--index",
        f"pytorch-cpu={dead}",
    )
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["dry_run"] is True and plan["steps"][0]["name"] == "preflight"
    assert plan["closure"]["lock"] is None and "could not be reached" in plan["closure"]["error"]
    assert all(s["action"] == "run" for s in plan["steps"])
    assert not workdir.exists()
    assert "does not exist" in assert_one_line_error(cli("status", "--workdir", str(workdir), "--json"))
    workdir.mkdir()
    status = cli("status", "--workdir", str(workdir), "--json")
    assert status.returncode == 0
    data = json.loads(status.stdout)
    assert data["workdir"] == str(workdir)
    assert [s["state"] for s in data["steps"]] == ["pending"] * len(data["steps"])
    assert set(data["steps"][0]) >= {"name", "state", "seconds", "log"}
    assert list(workdir.iterdir()) == []


def test_default_workdir_is_under_home(cli, home: Path) -> None:
    assert str(home / "ascend-setup") in assert_one_line_error(cli("status", "--json"))
    (home / "ascend-setup").mkdir()
    data = json.loads(cli("status", "--json").stdout)
    assert data["workdir"] == str(home / "ascend-setup")


def test_corrupt_state_is_exit_2_and_kept(cli, tmp_path: Path) -> None:
    workdir = tmp_path / "wd"
    workdir.mkdir()
    (workdir / "state.json").write_text("{half a file")
    for args in (
        ["status", "--workdir", str(workdir)],
        ["resume", "--workdir", str(workdir)],
        ["install", "--cann", "9.1.0", "--workdir", str(workdir), "--yes"],
    ):
        line = assert_one_line_error(cli(*args))
        assert "state.json is corrupt" in line
    assert (workdir / "state.json").read_text() == "{half a file"


def test_version_and_module_entry(cli) -> None:
    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("ascend-setup ")


def test_status_tells_running_from_interrupted(cli, tmp_path: Path) -> None:
    from ascend_setup.engine.state import StepRecord
    from ascend_setup.engine.workdir import Workdir
    from ascend_setup.steps.install_session import install_store

    workdir = tmp_path / "wd"
    workdir.mkdir()
    store = install_store(Workdir(workdir))
    state = store.empty()
    state.steps["preflight"] = StepRecord(
        state="started", fingerprint="x", started_at=1.0, log=str(workdir / "logs" / "preflight.log")
    )
    store.save(state)
    first = json.loads(cli("status", "--workdir", str(workdir), "--json").stdout)["steps"][0]
    assert first["state"] == "interrupted"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl,os,sys,time; fd=os.open(sys.argv[1], os.O_RDWR|"
            "os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, str(os.getpid()).encode());"
            "print('locked', flush=True); time.sleep(30)",
            str(workdir / "run.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        first = json.loads(cli("status", "--workdir", str(workdir), "--json").stdout)["steps"][0]
        assert first["state"] == f"running (pid {holder.pid})"
    finally:
        holder.kill()
        holder.wait()


def _private_mounts() -> bool:
    """Root with unshare, where / is a mount point (not inside a chroot): a read-only bind can be made safely."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    return (
        subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True).returncode == 0
    )


@pytest.mark.skipif(not _private_mounts(), reason="needs root, unshare and a private mount namespace for a ro mount")
def test_read_commands_work_on_a_read_only_workdir(home: Path, tmp_path: Path) -> None:
    """A read-only bind mount (as root, permission bits prove nothing): status, doctor and a dry run read."""
    import venv as venv_module

    workdir = tmp_path / "wd"
    workdir.mkdir()
    (workdir / "state.json").write_text(
        json.dumps({"format": "ascend-setup-state", "version": 1, "options": {}, "steps": {}})
    )
    venv_module.create(tmp_path / "venv", with_pip=False)
    dead = "http://127.0.0.1:9/simple/"
    # (command, the worst exit code that is not a refusal: doctor and audit report findings with 1)
    commands = [
        (["status", "--workdir", str(workdir), "--json"], 0),
        (["doctor", "--workdir", str(workdir), "--json"], 1),
        (
            [
                "install",
                "--cann",
                "9.1.0",
                "--workdir",
                str(workdir),
                "--dry-run",
                "--json",
                "--index-url",
                dead,
                "--index",
                f"ascend={dead}",
                "--index",
                f"pytorch-cpu={dead}",
            ],
            0,
        ),
        (["audit", "--venv", str(tmp_path / "venv"), "--json"], 1),
    ]
    script = (
        f"mount --bind {workdir} {workdir} && mount -o remount,bind,ro {workdir} || exit 98; "
        f"touch {workdir}/probe 2>/dev/null && exit 99; "
    )
    for i, (command, worst) in enumerate(commands):
        script += (
            " ".join([sys.executable, "-m", "ascend_setup", *command, ">/dev/null"])
            + f"; [ $? -le {worst} ] || exit {i + 10}; "
        )
    proc = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "/bin/bash", "-c", script],
        capture_output=True,
        text=True,
        env=clean_env(home),
        timeout=300,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert sorted(p.name for p in workdir.iterdir()) == ["state.json"]


def test_every_option_has_help_text() -> None:
    import argparse

    from ascend_setup.cli.main import build_parser

    missing = []

    def walk(parser: argparse.ArgumentParser, path: list) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, path + [name])
            elif not action.help and action.dest != "help":
                missing.append(" ".join(path + (action.option_strings or [action.dest])))

    walk(build_parser(full=True), [])
    assert not missing, missing


def test_resume_on_login_is_not_left_after_a_failure_a_rerun_cannot_fix(cli, home: Path, tmp_path: Path) -> None:
    """No CANN here: preflight fails, the same at every login; the block would rerun it in the background forever."""
    (home / ".bashrc").write_text("alias ll='ls -l'\n")
    (tmp_path / "none").mkdir()  # an empty CANN root: no toolkit in it
    proc = cli(
        "install",
        "--cann",
        "9.1.0",
        "--workdir",
        str(tmp_path / "wd"),
        "--cann-home",
        str(tmp_path / "none"),
        "--mirror",
        "none",
        "--yes",
        "--resume-on-login",
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "a rerun at login cannot fix this failure" in proc.stderr
    assert (home / ".bashrc").read_text() == "alias ll='ls -l'\n"


def test_read_commands_need_no_writable_home(cli, tmp_path: Path) -> None:
    """fit writes nothing: with HOME unset it still answers (an install or probe, which write, still need one)."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 4,
                "intermediate_size": 128,
                "vocab_size": 1000,
                "torch_dtype": "bfloat16",
            }
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "ascend_setup", "fit", str(model), "--json"],
        capture_output=True,
        text=True,
        env={k: v for k, v in clean_env(tmp_path).items() if k != "HOME"},
    )
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout)


def test_the_dry_run_predicts_preflights_verdict(cli, tmp_path: Path) -> None:
    (tmp_path / "no-cann").mkdir()
    (tmp_path / "index").mkdir()
    proc = cli(
        "install",
        "--cann",
        "9.1.0",
        "--dry-run",
        "--json",
        "--workdir",
        str(tmp_path / "wd"),
        "--cann-home",
        str(tmp_path / "no-cann"),
        "--index-url",
        (tmp_path / "index").as_uri(),
    )
    assert proc.returncode == 0, proc.stderr
    verdict = json.loads(proc.stdout)["preflight"]
    assert verdict["will_fail"] and "no CANN toolkit found" in verdict["problems"][0]["what"]
    assert not (tmp_path / "wd").exists()  # still a dry run
