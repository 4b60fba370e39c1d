"""The hostile files of the new user's report, through the CLI as a user runs it: each is bad input (exit 2,
one line on stderr naming the file and the field, `{"error", "hint", "exit"}` on stdout under --json, no
traceback, nothing on disk changed); a host name with escape sequences reaches the terminal escaped; a
--out in a missing directory is written there. In-process coverage of every kind: tests/unit/test_loaded_files.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest
from helpers.cli import assert_one_line_error

FINDING = {"id": "triton-upstream", "severity": "error", "package": "triton", "message": "upstream triton"}
CONFIG = {"num_hidden_layers": 36, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8}


def _fleet(findings: Any) -> Callable[[Path], Tuple[List[str], Path, str]]:
    def setup(case: Path) -> Tuple[List[str], Path, str]:
        results = case / "run"
        results.mkdir()
        good = {"host": "good", "rc": 0, "stderr": "", "audit": {"venv": "/v", "findings": []}}
        (results / "good.audit.json").write_text(json.dumps(good))
        (results / "bad.audit.json").write_text(json.dumps({**good, "host": "bad", "audit": {"findings": findings}}))
        (results / "report.json").write_text("{}\n")  # an earlier report: left as it was
        return ["fleet", "report", str(results)], results / "bad.audit.json", "audit.findings.0"

    return setup


def _venv_record(record: Dict[str, Any], field: str) -> Callable[[Path], Tuple[List[str], Path, str]]:
    def setup(case: Path) -> Tuple[List[str], Path, str]:
        venv = case / "venv"
        venv.mkdir()
        (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
        (venv / "ascend-setup.json").write_text(json.dumps({"workdir": str(case), **record}))
        return ["audit", "--venv", str(venv)], venv / "ascend-setup.json", field

    return setup


def _fit(config: Dict[str, Any], field: str) -> Callable[[Path], Tuple[List[str], Path, str]]:
    def setup(case: Path) -> Tuple[List[str], Path, str]:
        model = case / "model"
        model.mkdir()
        (model / "config.json").write_text(json.dumps({**CONFIG, **config}))
        return ["fit", str(model)], model / "config.json", field

    return setup


def _inventory(text: str, field: str) -> Callable[[Path], Tuple[List[str], Path, str]]:
    def setup(case: Path) -> Tuple[List[str], Path, str]:
        (case / "nodes.yml").write_text(text)
        return ["doctor", "--nodes", str(case / "nodes.yml")], case / "nodes.yml", field

    return setup


Setup = Callable[[Path], Tuple[List[str], Path, str]]
Change = Callable[[Dict[str, Any]], None]


def _python_builds(change: Change, field: str) -> Setup:
    def setup(case: Path) -> Tuple[List[str], Path, str]:
        from helpers.handmade_bundle import builds_doc

        doc = builds_doc(b"archive")
        change(doc)
        (case / "builds.json").write_text(json.dumps(doc))
        return (
            [
                "install",
                "--cann",
                "9.1.0",
                "--python-builds",
                str(case / "builds.json"),
                "--workdir",
                str(case / "wd"),
                "--yes",
            ],
            case / "builds.json",
            field,
        )

    return setup


def _bundle_manifest(change: Change, field: str) -> Setup:
    def setup(case: Path) -> Tuple[List[str], Path, str]:
        from helpers.handmade_bundle import make_bundle

        root = make_bundle(case / "bundle", manifest=change)
        return ["bundle", "verify", str(root)], root / "manifest.json", field

    return setup


BAD = {
    "inventory:timeout-is-text": _inventory("nodes: [{name: a}]\ntimeout: '12'\n", "timeout"),
    "inventory:ansible-port-is-a-list": _inventory(
        "all: {hosts: {h: {ansible_port: [22]}}}\n", "all.hosts.h.ansible_port"
    ),
    "inventory:ansible-vars-a-string": _inventory("all: {hosts: {h: }, vars: x}\n", "all.vars"),
    "inventory:ansible-groups-alias-30-deep": _inventory(
        "g0: &g0 {hosts: {h: }}\n"
        + "".join(f"g{i}: &g{i} {{children: {{a: *g{i - 1}, b: *g{i - 1}}}}}\n" for i in range(1, 31)),
        "YAML aliases expand",
    ),
    "python-builds:file-climbs-out": _python_builds(
        lambda d: d["builds"][0].update(file="../../../victim.tar.gz"), "builds.0.file"
    ),
    "python-builds:pinned-twice": _python_builds(lambda d: d["builds"].append(d["builds"][0]), "builds"),
    "bundle-manifest:path-climbs-out": _bundle_manifest(
        lambda d: d["files"][0].update(path="../outside.txt"), "files.0.path"
    ),
    "bundle-manifest:size-is-text": _bundle_manifest(lambda d: d["files"][0].update(size="12"), "files.0.size"),
    "fleet:finding-without-id": _fleet([{"severity": "error", "message": "m"}]),
    "fleet:findings-are-strings": _fleet(["triton-upstream", "extra"]),
    "fleet:id-is-a-list": _fleet([{**FINDING, "id": ["triton-upstream"]}]),
    "venv-record:lock-is-a-number": _venv_record({"lock": 5}, "lock"),
    "venv-record:indexes-nested": _venv_record({"indexes": {"mirror": {"url": {"deeper": "x"}}}}, "indexes.mirror"),
    "venv-record:created-is-text": _venv_record({"created": "yes"}, "created"),
    "fit:a-billion-layers": _fit({"num_hidden_layers": 10**9}, "num_hidden_layers"),
    "fit:quantization-config-is-a-string": _fit({"quantization_config": "fp8"}, "quantization_config"),
}


def _snapshot(root: Path) -> Dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("as_json", [False, True], ids=["human", "json"])
@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_a_hostile_file_is_one_line_of_bad_input(cli, tmp_path: Path, case: str, as_json: bool) -> None:
    root = tmp_path / "case"
    root.mkdir()
    argv, bad_file, field = BAD[case](root)
    before = _snapshot(root)
    proc = cli(*argv, *(["--json"] if as_json else []))
    line = assert_one_line_error(proc, 2)
    assert str(bad_file) in line and field in line, line
    if as_json:
        answer = json.loads(proc.stdout)
        assert set(answer) == {"error", "hint", "exit"} and answer["exit"] == 2 and field in answer["error"]
    else:
        assert proc.stdout == ""
    assert _snapshot(root) == before


def test_a_host_name_with_escapes_reaches_the_terminal_escaped(cli, tmp_path: Path) -> None:
    """Off a terminal the grid falls back to one plain line per host: that path, too, shows escapes as text."""
    results = tmp_path / "run"
    results.mkdir()
    host = "node1\x1b]0;owned\x07\x1b[2J"
    (results / "node1.audit.json").write_text(
        json.dumps({"host": host, "rc": 1, "stderr": "", "audit": {"findings": [FINDING]}})
    )
    for columns in ("200", "20"):  # the grid, and the plain lines a narrow console falls back to
        proc = cli("fleet", "report", str(results), env={"COLUMNS": columns})
        assert proc.returncode == 1, proc.stderr
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout
        assert "node1\\x1b]0;owned\\x07\\x1b[2J" in proc.stdout
    data = json.loads(cli("fleet", "report", str(results), "--json").stdout)  # JSON keeps the name, escaped by JSON
    assert data["hosts"][0]["host"] == host


def test_out_in_a_missing_directory_is_written_there(cli, tmp_path: Path) -> None:
    """As `plan --lock` does: check_output_file made sure the directory can be made."""
    results = tmp_path / "run"
    results.mkdir()
    (results / "n1.audit.json").write_text(json.dumps({"findings": []}))
    out = tmp_path / "reports" / "today" / "fleet.json"
    proc = cli("fleet", "report", str(results), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["ok"] is True
