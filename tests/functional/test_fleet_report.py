"""`ascend-setup fleet report`: many hosts' audit results (as ansible/audit.yml leaves them) in one view."""

from __future__ import annotations

import json
from pathlib import Path

from ascend_setup.fleet.merged_report import grid, read_fleet

CLEAN = {
    "venv": "/v",
    "lock": "/l",
    "ok": True,
    "findings": [{"id": "direct-url", "severity": "info", "package": "vllm-ascend", "message": "from a file"}],
}
BROKEN = {
    "venv": "/v",
    "lock": "/l",
    "ok": False,
    "findings": [
        {
            "id": "triton-upstream",
            "severity": "error",
            "package": "triton",
            "message": "upstream triton 3.5.0 is installed",
        },
        {"id": "extra", "severity": "warning", "package": "foo", "message": "foo is not in the lock"},
    ],
}


def write(directory: Path, host: str, rc: int, audit, stderr: str = "") -> None:
    directory.mkdir(exist_ok=True)
    (directory / f"{host}.audit.json").write_text(
        json.dumps({"host": host, "rc": rc, "stderr": stderr, "audit": audit})
    )


def test_report_names_each_host_and_finding(cli, tmp_path: Path) -> None:
    results = tmp_path / "run"
    write(results, "a1", 0, CLEAN)
    write(results, "b2", 1, BROKEN)
    write(results, "c3", 2, None, stderr="ascend-setup: error: --venv /x does not exist\n")
    hosts = read_fleet(results)
    assert [h.result() for h in hosts] == ["clean (1 info)", "1 error, 1 warning", "did not run"]
    assert grid(hosts) == [
        ["a1", "clean (1 info)", "", ""],
        ["b2", "1 error, 1 warning", "error", "warning"],
        ["c3", "did not run", "", ""],
    ]
    proc = cli("fleet", "report", str(results), "--json")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["findings"] == {"triton-upstream": ["b2"], "extra": ["b2"], "direct-url": ["a1"]}
    assert data["did_not_run"] == ["c3"] and [h["ok"] for h in data["hosts"]] == [True, False, False]
    assert json.loads((results / "report.json").read_text())["hosts"] == data["hosts"]
    human = cli("fleet", "report", str(results), env={"COLUMNS": "80"})
    assert human.returncode == 1
    assert "b2: triton-upstream (triton): upstream triton 3.5.0 is installed" in human.stdout
    assert "c3: the audit did not run: exit 2: ascend-setup: error: --venv /x does not exist" in human.stdout
    assert "1 of 3 hosts clean; not clean: b2, c3" in human.stdout
    assert max(len(line) for line in human.stdout.splitlines()[:5]) <= 80  # the title and the grid


def test_all_clean_is_exit_0_and_the_report_goes_where_asked(cli, tmp_path: Path) -> None:
    results = tmp_path / "run"
    for host in ("h1", "h2"):
        write(results, host, 0, CLEAN)
    out = tmp_path / "merged.json"
    proc = cli("fleet", "report", str(results), "--out", str(out))
    assert proc.returncode == 0 and "2 of 2 hosts clean" in proc.stdout
    assert json.loads(out.read_text())["ok"] and not (results / "report.json").exists()


def test_plain_audit_json_files_are_read_and_an_unknown_severity_is_not_clean(cli, tmp_path: Path) -> None:
    results = tmp_path / "run"
    results.mkdir()
    (results / "n1.audit.json").write_text(json.dumps(CLEAN))  # as `audit --json > n1.audit.json` leaves it
    newer = {**CLEAN, "findings": [{"id": "hbm-low", "severity": "critical", "package": None, "message": "m"}]}
    (results / "n2.audit.json").write_text(json.dumps(newer))
    hosts = read_fleet(results)
    assert [(h.host, h.ok, h.result()) for h in hosts] == [
        ("n1", True, "clean (1 info)"),
        ("n2", False, "1 of unknown severity"),
    ]
    proc = cli("fleet", "report", str(results), "--json")
    assert proc.returncode == 1 and [h["ok"] for h in json.loads(proc.stdout)["hosts"]] == [True, False]
