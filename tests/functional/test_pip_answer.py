"""pip's answer about its configuration is remembered between runs (pipanswer), and never outlives a change of
what pip reads: generated over each kind of change (a file edited in place at the same size, a file that
appears, one removed, a variable set, PIP_CONFIG_FILE moved, XDG_CONFIG_HOME moved, the memo damaged). Each
case runs real interpreters: the first asks pip, the second is answered from the memo without importing pip's
internals, the third, after the change, gives what pip itself says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict

import pytest

from tests.helpers.cli import REPO

CHILD = (
    "import json, sys\n"
    "import time\n"
    "from ascend_setup.index.pipconfig import pip_settings\n"
    "from ascend_setup.utils.run_context import command_run\n"
    "with command_run(time.monotonic()) as run:\n"
    "    s = pip_settings()\n"
    "    run.end()  # as the command line does when a command ends\n"
    "print(json.dumps({'index': s.index_url, 'network': dict(s.network),\n"
    "                  'asked': 'pip._internal.configuration' in sys.modules}))\n"
)


def _conf(path: Path, index: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"[global]\nindex-url = {index}\n")
    return path


def _run(home: Path, env: Dict[str, str]) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "XDG_"))}
    base.update({"HOME": str(home), "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(home / "cache"), **env})
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=base, check=True)
    return json.loads(out.stdout)


Change = Callable[[Path, Dict[str, str]], str]  # (home, env to edit) -> the index pip should now give


def edited_in_place_same_size(home: Path, env: Dict[str, str]) -> str:
    _conf(home / ".config/pip/pip.conf", "https://b.example/simple")  # a.example -> b.example: same size
    return "https://b.example/simple"


def legacy_file_appears(home: Path, env: Dict[str, str]) -> str:
    (home / ".config/pip/pip.conf").unlink()
    _conf(home / ".pip/pip.conf", "https://legacy.example/simple")
    return "https://legacy.example/simple"


def file_removed(home: Path, env: Dict[str, str]) -> str:
    (home / ".config/pip/pip.conf").unlink()
    return ""


def variable_set(home: Path, env: Dict[str, str]) -> str:
    env["PIP_INDEX_URL"] = "https://variable.example/simple"
    return "https://variable.example/simple"


def config_file_moved(home: Path, env: Dict[str, str]) -> str:
    env["PIP_CONFIG_FILE"] = str(_conf(home / "other.conf", "https://other.example/simple"))
    return "https://other.example/simple"


def xdg_config_home_moved(home: Path, env: Dict[str, str]) -> str:
    env["XDG_CONFIG_HOME"] = str(home / "xdg")
    _conf(home / "xdg/pip/pip.conf", "https://xdg.example/simple")
    return "https://xdg.example/simple"


def memo_damaged(home: Path, env: Dict[str, str]) -> str:
    (home / "cache/ascend-setup/pip-answer.json").write_text('{"key": [')
    return "https://a.example/simple"


@pytest.mark.parametrize(
    "change",
    [
        edited_in_place_same_size,
        legacy_file_appears,
        file_removed,
        variable_set,
        config_file_moved,
        xdg_config_home_moved,
        memo_damaged,
    ],
    ids=lambda c: c.__name__,
)
def test_the_remembered_answer_follows_every_change_pip_would_see(change: Change, tmp_path: Path) -> None:
    home = tmp_path / "home"
    _conf(home / ".config/pip/pip.conf", "https://a.example/simple")
    env: Dict[str, str] = {}
    first, second = _run(home, env), _run(home, env)
    assert first["index"] == second["index"] == "https://a.example/simple"
    assert first["asked"] and not second["asked"], "the second run should be answered from the memo"
    expected = change(home, env)
    after = _run(home, env)
    assert (after["index"] or "") == expected
    assert after["asked"]


def test_a_command_keeps_the_answer_and_a_refused_one_writes_nothing(tmp_path: Path) -> None:
    """The memo is the tool's cache: a command that ran writes it, a command refused as bad input does not."""
    home = tmp_path / "home"
    _conf(home / ".config/pip/pip.conf", "https://a.example/simple")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "XDG_"))}
    env.update({"HOME": str(home), "PYTHONPATH": str(REPO)})
    mirrors = [
        sys.executable,
        "-m",
        "ascend_setup",
        "mirrors",
        "--only",
        "--json",
        "--candidate",
        "http://127.0.0.1:9/simple/",
    ]
    (tmp_path / "a-file").write_text("x")
    refused = subprocess.run([*mirrors, "--workdir", str(tmp_path / "a-file")], capture_output=True, text=True, env=env)
    assert refused.returncode == 2, refused.stderr
    assert not (home / ".cache").exists()
    ran = subprocess.run([*mirrors, "--workdir", str(tmp_path / "wd")], capture_output=True, text=True, env=env)
    assert ran.returncode in (0, 1), ran.stderr
    memo = json.loads((home / ".cache/ascend-setup/pip-answer.json").read_text())
    assert memo["answer"]["items"]


def test_a_network_setting_is_remembered_with_its_value(tmp_path: Path) -> None:
    home = tmp_path / "home"
    conf = _conf(home / ".config/pip/pip.conf", "https://a.example/simple")
    conf.write_text(conf.read_text() + "timeout = 42\n")
    first, second = _run(home, {}), _run(home, {})
    assert not second["asked"]
    assert first["network"] == second["network"] and second["network"]["timeout"] == "42"
