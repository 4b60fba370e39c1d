"""Output at any width: every table command at COLUMNS=80 prints each value whole (long values on lines of
their own), at COLUMNS=0 (or under 20) and off a terminal one plain line per row; never 0 bytes."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Iterable, List

import pytest
from rich.console import Console

from ascend_setup.cli.progress import ConsoleReporter
from ascend_setup.cli.render import print_table
from ascend_setup.engine.state import StepRecord
from ascend_setup.engine.workdir import Workdir
from ascend_setup.steps.install_session import install_store

LONG = "/srv/" + "a-very-long-directory-name/" * 4 + "logs/plugin-deps.log"


def _render(monkeypatch, columns: str, rows, terminal: bool = True) -> str:
    monkeypatch.setenv("COLUMNS", columns)
    out = io.StringIO()
    console = Console(
        file=out, force_terminal=terminal, width=int(columns) if int(columns) >= 20 else 400, color_system=None
    )
    print_table(console, "a title that names " + LONG, ["step", "state", "log"], rows, status_column=1)
    return out.getvalue()


def assert_whole(text: str, values: Iterable[str], columns: int) -> None:
    """Each value on one line, unbroken; at a width, a table's line (one that starts with a value) runs past it
    only when it holds a longer value (prose around the tables wraps at words: test_audit checks that)."""
    lines = text.splitlines()
    values = [v for v in values if v]
    assert text.strip(), "nothing printed"
    for value in values:
        assert any(value in line for line in lines), value
    if columns:
        for line in (line for line in lines if line.split() and line.split()[0].rstrip(":") in values):
            assert len(line.rstrip()) <= columns or any(len(v) > columns - 8 and v in line for v in values), line


def test_a_table_that_fits_is_a_table(monkeypatch) -> None:
    text = _render(monkeypatch, "80", [["preflight", "done", "/l/p.log"], ["venv", "started", "/l/v.log"]])
    assert "step       state    log" in text and "preflight  done     /l/p.log" in text


def test_a_long_cell_goes_on_a_line_of_its_own_at_80_columns(monkeypatch) -> None:
    rows = [["plugin-deps", "done", LONG], ["venv", "started", "/l/v.log"]]
    text = _render(monkeypatch, "80", rows)
    assert f"    log: {LONG}" in text.splitlines() and "    log: /l/v.log" in text.splitlines()
    assert_whole(text, [c for r in rows for c in r], 80)


@pytest.mark.parametrize("columns", ["0", "5", "19"])
def test_under_20_columns_plain_lines(monkeypatch, columns: str) -> None:
    text = _render(monkeypatch, columns, [["plugin-deps", "done", LONG]])
    assert f"  plugin-deps  state: done  log: {LONG}" in text.splitlines()


def test_off_a_terminal_plain_lines(monkeypatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    print_table(Console(file=out, width=400), None, ["step", "state", "log"], [["venv", "done", "/l/v.log"]])
    assert out.getvalue() == "  venv  state: done  log: /l/v.log\n"


def _state(workdir: Path) -> List[str]:
    workdir.mkdir(parents=True)
    logs = workdir / ("logs-in-a-directory-with-a-long-name-" * 2)
    store = install_store(Workdir(workdir))
    state = store.empty()
    state.options = {"cann": "9.1.0"}
    for i, name in enumerate(("preflight", "mirror", "resolve")):
        state.steps[name] = StepRecord(
            state="done" if i < 2 else "failed",
            fingerprint="f",
            started_at=1.0,
            ended_at=2.5,
            log=str(logs / f"{name}.log"),
            error="uv found no installable set of versions" if i == 2 else None,
        )
    store.save(state)
    return [str(logs / f"{n}.log") for n in ("preflight", "mirror", "resolve")]


def _fleet(directory: Path) -> None:
    directory.mkdir()
    findings = [
        {"id": "cann-dep-missing", "severity": "error", "package": "decorator", "message": "missing"},
        {"id": "torch-npu-version-mismatch", "severity": "warning", "package": "torch-npu", "message": "m"},
    ]
    for host in ("atlas-a2-node-017.cluster.example", "b2"):
        (directory / f"{host}.audit.json").write_text(
            json.dumps(
                {"host": host, "rc": 1, "audit": {"venv": "/v", "lock": "/l", "ok": False, "findings": findings}}
            )
        )


@pytest.mark.parametrize("columns", ["80", "0"])
def test_every_table_command_prints_each_value_whole(cli, tmp_path: Path, columns: str) -> None:
    env = {"COLUMNS": columns}
    width = int(columns)
    listing = json.loads(cli("matrix", "list", "--json").stdout)
    text = cli("matrix", "list", env=env).stdout
    assert_whole(text, [str(v) for r in listing["rows"] for v in r.values()] + ["vllm-ascend", "triton-ascend"], width)
    row = json.loads(cli("matrix", "show", "9.1.0", "--json").stdout)
    text = cli("matrix", "show", "9.1.0", env=env).stdout
    assert_whole(text, [*row["packages"], *row["packages"].values()], width)

    logs = _state(tmp_path / "wd")
    text = cli("status", "--workdir", str(tmp_path / "wd"), env=env).stdout
    assert_whole(text, [*logs, "uv found no installable set of versions", "preflight", "failed"], width)

    _fleet(tmp_path / "run")
    text = cli("fleet", "report", str(tmp_path / "run"), env=env).stdout
    assert_whole(text, ["atlas-a2-node-017.cluster.example", "cann-dep-missing", "torch-npu-version-mismatch"], width)

    text = cli("doctor", "--workdir", str(tmp_path / "wd"), env=env).stdout
    checks = json.loads(cli("doctor", "--workdir", str(tmp_path / "wd"), "--json").stdout)["checks"]
    assert_whole(text, [c["id"] for c in checks], width)

    from helpers.fake_dists import clean_venv
    from helpers.models import QWEN3_VL_8B

    venv = clean_venv(tmp_path / "v", override={"torch": "2.11.0"})
    report = json.loads(cli("audit", "--venv", str(venv), "--json").stdout)
    text = cli("audit", "--venv", str(venv), env=env).stdout
    assert_whole(text, [str(venv)] + [v for f in report["findings"] for v in (f["id"], f["package"])], width)

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(QWEN3_VL_8B))
    fit = json.loads(cli("fit", str(tmp_path / "model"), "--json", "--workdir", str(tmp_path / "wd")).stdout)
    text = cli("fit", str(tmp_path / "model"), "--workdir", str(tmp_path / "wd"), env=env).stdout
    assert_whole(text, [str(tmp_path / "model"), *fit["serve_args"]], width)

    refused = f"http://127.0.0.1:{_free_port()}/simple/"
    text = cli("mirrors", "--only", "--candidate", refused, "--budget", "1", env=env).stdout
    assert_whole(text, [refused, "error"], width)


def _free_port() -> int:
    """A loopback port nobody listens on (connections to it are refused)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_live_line_is_one_line_and_its_clock_ticks_without_output() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80, color_system=None)
    reporter = ConsoleReporter(console)
    reporter.starting("vllm-ascend", "not run yet", "build", Path(LONG))
    reporter.activity("Building wheel for vllm-ascend (pyproject.toml) " + "x" * 200)
    first = reporter._text()
    time.sleep(2.2)  # no output meanwhile
    later = reporter._text()
    reporter.finished("vllm-ascend", 2.2)
    assert len(first.plain) <= 78 and "\n" not in first.plain
    assert first.plain.endswith(" · 0 s") and later.plain.endswith(" · 2 s")
    assert "(not run yet)" not in out.getvalue()  # the usual reason goes unsaid


def test_off_a_terminal_a_heartbeat_names_the_step_and_its_last_output() -> None:
    out = io.StringIO()
    reporter = ConsoleReporter(Console(file=out, width=400), heartbeat=0.3)
    reporter.starting("vllm-ascend", "interrupted last time; running again", "build", Path("/l/b.log"))
    reporter.activity("[3/8] compiling kernels")
    clock = reporter._clock
    time.sleep(0.8)
    reporter.finished("vllm-ascend", 0.8)
    beats = [line for line in out.getvalue().splitlines() if "still running" in line]
    assert (
        beats
        and beats[0].startswith("… vllm-ascend: still running")
        and beats[0].endswith("last output: [3/8] compiling kernels")
    )
    assert clock is not None and not clock.is_alive()  # the step's clock ends with the step (other tests' may live)
