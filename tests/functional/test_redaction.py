"""A password or token in a URL never leaves the process: generated over every flag that carries a URL, each
run (human and --json) against a dead loopback index, so the URL is shown in an error, a check, a table or a
step log. The password and the token are absent from stderr, stdout and every log of the workdir; the
masked form (`alice:****@`) is present, so each case did show the URL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

import pytest
from helpers.python_releases import write_builds_file

from ascend_setup.simulate.fake_cann import build_fake_cann

DEAD = "http://127.0.0.1:9/simple/"
SECRET_URL = "http://alice:PASSWORD@127.0.0.1:9/simple/?token=SECRET"
ISOLATED = ["--index", f"ascend={DEAD}", "--index", f"pytorch-cpu={DEAD}"]
INSTALL = ["install", "--cann", "9.1.0", "--yes", "--workdir", "{c}/wd", "--cann-home", "{c}/Ascend"]

#: flag -> a command that shows the URL it was given ({c}: the case's directory).
FLAGS: Dict[str, List[str]] = {
    "install --index-url": [*INSTALL, "--index-url", SECRET_URL, *ISOLATED, "--mirror", "none"],
    "install --extra-index-url": [
        *INSTALL,
        "--index-url",
        DEAD,
        "--extra-index-url",
        SECRET_URL,
        *ISOLATED,
        "--mirror",
        "none",
    ],
    "install --index NAME=URL": [
        *INSTALL,
        "--index-url",
        DEAD,
        "--index",
        f"ascend={SECRET_URL}",
        "--index",
        f"pytorch-cpu={DEAD}",
        "--mirror",
        "none",
    ],
    "install --mirror URL": [*INSTALL, "--mirror", SECRET_URL, *ISOLATED],
    "install --python-mirror": [
        *INSTALL,
        "--python",
        "managed",
        "--python-builds",
        "{c}/builds.json",
        "--python-mirror",
        "http://alice:PASSWORD@127.0.0.1:9/pbs?token=SECRET",
        "--index-url",
        DEAD,
        *ISOLATED,
        "--mirror",
        "none",
    ],
    "plan --index-url": [
        "plan",
        "--cann",
        "9.1.0",
        "--arch",
        "aarch64",
        "--glibc",
        "2.31",
        "--python",
        "3.11",
        "--index-url",
        SECRET_URL,
        *ISOLATED,
    ],
    "doctor --index-url": ["doctor", "--workdir", "{c}/wd", "--index-url", SECRET_URL],
    "doctor --index NAME=URL": [
        "doctor",
        "--workdir",
        "{c}/wd",
        "--index-url",
        DEAD,
        "--index",
        f"ascend={SECRET_URL}",
    ],
    "mirrors --candidate": ["mirrors", "--only", "--candidate", SECRET_URL, "--budget", "1", "--workdir", "{c}/wd"],
}


@pytest.mark.parametrize("as_json", [False, True], ids=["human", "json"])
@pytest.mark.parametrize("flag", FLAGS)
def test_a_password_in_a_url_is_never_shown(cli, tmp_path: Path, flag: str, as_json: bool) -> None:
    build_fake_cann(tmp_path / "Ascend")
    write_builds_file(
        tmp_path / "builds.json", Path("cpython-3.11.9.tar.gz"), "3.11.9", "0" * 64, ["http://127.0.0.1:9/pbs"]
    )
    argv = [a.replace("{c}", str(tmp_path)) for a in FLAGS[flag]]
    proc = cli(*argv, *(["--json"] if as_json else []), timeout=300)
    assert proc.returncode in (0, 1, 2) and "Traceback" not in proc.stderr, proc.stderr
    logs = {str(p): p.read_text(errors="replace") for p in (tmp_path / "wd").rglob("*.log")}
    state = tmp_path / "wd" / "state.json"  # its options keep the URL for resume (mode 600); a step's error never
    errors = {
        f"state.json {name}": str(step.get("error"))
        for name, step in (json.loads(state.read_text())["steps"].items() if state.exists() else [])
    }
    shown = {"stdout": proc.stdout, "stderr": proc.stderr, **logs, **errors}
    leaked = [where for where, text in shown.items() if "PASSWORD" in text or "SECRET" in text]
    assert not leaked, {w: shown[w][-500:] for w in leaked}
    assert any("alice:****@" in text for text in shown.values()), "the case never showed its URL"
