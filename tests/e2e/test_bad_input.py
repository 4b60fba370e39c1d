"""Every command, every class of bad value: exit 2, one line on stderr, no traceback, nothing on disk changed.

The cases are generated: each command's flags (and the ASCEND_SETUP_* variables behind them) are given
every value of their kind that cannot be used. The whole tree's manifest is compared before and after.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
import venv as venv_module
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import pytest
from helpers.cli import assert_one_line_error, clean_env

from ascend_setup.utils.files import atomic_write_text

DEAD = "http://127.0.0.1:9/simple/"  # refused at once: a case that wrongly goes on fails fast, offline

#: value kinds -> (label, value) pairs; "{t}" is the fixtures' directory
KINDS: Dict[str, List[Tuple[str, str]]] = {
    "newdir": [
        ("under-a-file", "{t}/a-file/sub"),
        ("a-file", "{t}/a-file"),
        ("a-fifo", "{t}/a-fifo"),
        ("uncreatable", "/proc/ascend-setup-x"),
        ("empty", ""),
    ],
    "readdir": [("a-file", "{t}/a-file"), ("a-fifo", "{t}/a-fifo"), ("empty", "")],
    "existingdir": [("missing", "{t}/missing"), ("a-file", "{t}/a-file"), ("a-fifo", "{t}/a-fifo"), ("empty", "")],
    "infile": [
        ("missing", "{t}/missing.yaml"),
        ("a-dir", "{t}/a-dir"),
        ("a-fifo", "{t}/a-fifo"),
        ("garbage", "{t}/garbage.bin"),
        ("device", "/dev/zero"),
        ("empty", ""),
    ],
    "outfile": [("a-dir", "{t}/a-dir"), ("a-fifo", "{t}/a-fifo"), ("under-a-file", "{t}/a-file/x.lock")],
    "exe": [
        ("missing", "{t}/python3.11"),
        ("a-dir", "{t}/a-dir"),
        ("not-python", "/bin/true"),
        ("garbage", "{t}/garbage.bin"),
        ("a-fifo", "{t}/a-fifo"),
        ("empty", ""),
    ],
    "pyversion": [("word", "three"), ("too-old", "3.9"), ("out-of-range", "3.13"), ("exe-missing", "{t}/nopython")],
    "url": [("ftp", "ftp://x/simple"), ("words", "not a url"), ("empty", "")],
    "index": [("no-url", "ascend"), ("unknown-name", "nope=http://x/simple"), ("bad-url", "ascend=ftp://x")],
    "cann": [("unknown", "7.0.0"), ("garbage", "9.1.0; rm -rf /"), ("empty", "")],
    "glibc": [("words", "two"), ("empty", "")],
    "arch": [("sparc", "sparc"), ("empty", "")],
    "number": [("word", "fast"), ("negative", "-1"), ("huge", "1e9")],
    "venv": [
        ("missing", "{t}/missing"),
        ("a-file", "{t}/a-file"),
        ("a-fifo", "{t}/a-fifo"),
        ("garbage-cfg", "{t}/broken-venv"),
    ],
    "model": [
        ("missing", "{t}/missing"),
        ("garbage", "{t}/garbage.bin"),
        ("a-fifo", "{t}/a-fifo"),
        ("no-config", "{t}/a-dir"),
        ("not-a-model", "{t}/not-a-model.json"),
    ],
    "card": [("unknown", "910C"), ("garbage", "x; y")],
    "fraction": [("word", "most"), ("zero", "0"), ("above-one", "1.5")],
    "results": [
        ("missing", "{t}/missing"),
        ("a-file", "{t}/a-file"),
        ("a-fifo", "{t}/a-fifo"),
        ("no-results", "{t}/a-dir"),
        ("garbage", "{t}/bad-results"),
        ("not-a-result", "{t}/odd-results"),
    ],
}
#: Positional arguments that the "" flag of a command replaces.
POSITIONALS = ("{t}/model", "{t}/fleet-results", "{t}/bundle")
ISOLATED = ["--index-url", DEAD, "--index", f"ascend={DEAD}", "--index", f"pytorch-cpu={DEAD}"]
#: command -> (base arguments, {flag: kind}, {ASCEND_SETUP_* variable: kind})
COMMANDS: Dict[str, Tuple[List[str], Dict[str, str], Dict[str, str]]] = {
    "install": (
        ["install", "--cann", "9.1.0", "--yes", "--workdir", "{c}/wd", *ISOLATED, "--mirror", "none"],
        {
            "--workdir": "newdir",
            "--venv": "newdir",
            "--python": "exe",
            "--cann-home": "existingdir",
            "--extra-index-url": "url",
            "--lock": "infile",
            "--matrix": "infile",
            "--cann": "cann",
            "--index": "index",
            "--installer": "arch",
            "--soc": "cann",
            "--python-mirror": "url",
            "--python-builds": "infile",
        },
        {
            "ASCEND_SETUP_WORKDIR": "newdir",
            "ASCEND_SETUP_VENV": "newdir",
            "ASCEND_SETUP_PYTHON": "exe",
            "ASCEND_SETUP_CANN_HOME": "existingdir",
            "ASCEND_SETUP_MATRIX": "infile",
            "ASCEND_SETUP_PYTHON_BUILDS": "infile",
        },
    ),
    "install --dry-run": (
        ["install", "--cann", "9.1.0", "--dry-run", "--workdir", "{c}/wd", *ISOLATED],
        {"--workdir": "newdir", "--venv": "newdir", "--python": "exe", "--index-url": "url", "--mirror": "url"},
        {},
    ),
    "resume": (["resume"], {"--workdir": "existingdir"}, {"ASCEND_SETUP_WORKDIR": "existingdir"}),
    "status": (["status"], {"--workdir": "existingdir"}, {"ASCEND_SETUP_WORKDIR": "existingdir"}),
    "plan": (
        ["plan", "--cann", "9.1.0", "--glibc", "2.31", "--arch", "aarch64", "--python", "3.11", *ISOLATED],
        {
            "--cann": "cann",
            "--glibc": "glibc",
            "--arch": "arch",
            "--python": "pyversion",
            "--index-url": "url",
            "--index": "index",
            "--lock": "outfile",
            "--matrix": "infile",
            "--soc": "cann",
        },
        {"ASCEND_SETUP_MATRIX": "infile"},
    ),
    "audit": (
        ["audit", "--venv", "{t}/good-venv"],
        {
            "--venv": "venv",
            "--lock": "infile",
            "--cann": "cann",
            "--index": "index",
            "--matrix": "infile",
            "--soc": "cann",
        },
        {"ASCEND_SETUP_MATRIX": "infile"},
    ),
    "doctor": (
        ["doctor", "--workdir", "{c}/wd"],
        {
            "--workdir": "readdir",
            "--venv": "readdir",
            "--cann-home": "existingdir",
            "--python": "exe",
            "--cann": "cann",
            "--index": "index",
            "--matrix": "infile",
            "--soc": "cann",
            "--index-url": "url",
            "--root": "existingdir",
        },
        {
            "ASCEND_SETUP_WORKDIR": "readdir",
            "ASCEND_SETUP_VENV": "readdir",
            "ASCEND_SETUP_PYTHON": "exe",
            "ASCEND_SETUP_CANN_HOME": "existingdir",
            "ASCEND_SETUP_ROOT": "existingdir",
        },
    ),
    "container run-command": (
        ["container", "run-command"],
        {
            "--root": "existingdir",
            "--cards": "card",
            "--cache": "readdir",
            "--cann": "cann",
            "--matrix": "infile",
            "--runtime": "arch",
        },
        {"ASCEND_SETUP_ROOT": "existingdir", "ASCEND_SETUP_MATRIX": "infile"},
    ),
    "mirrors": (
        ["mirrors", "--only", "--candidate", DEAD, "--workdir", "{c}/wd"],
        {
            "--budget": "number",
            "--candidate": "url",
            "--python": "pyversion",
            "--workdir": "readdir",
            "--index": "index",
            "--matrix": "infile",
            "--cann": "cann",
        },
        {},
    ),
    "mirrors --apply": (
        ["mirrors", "--only", "--candidate", DEAD, "--workdir", "{c}/wd", "--apply"],
        {"--venv": "venv"},
        {},
    ),
    "matrix show": (["matrix", "show", "9.1.0"], {"--matrix": "infile"}, {"ASCEND_SETUP_MATRIX": "infile"}),
    "fit": (
        ["fit", "{t}/model", "--workdir", "{c}/wd"],
        {
            "": "model",
            "--card": "card",
            "--context": "number",
            "--gpu-memory-utilization": "fraction",
            "--kv-dtype": "arch",
            "--bandwidth": "number",
            "--workdir": "readdir",
        },
        {},
    ),
    "probe": (
        ["probe", "--device", "cpu", "--gib", "0.01", "--venv", "{t}/good-venv", "--workdir", "{c}/wd"],
        {"--venv": "venv", "--gib": "number"},
        {},
    ),
    "matrix validate": (["matrix", "validate"], {"": "infile"}, {}),
    "matrix derive": (
        ["matrix", "derive", "--vllm-ascend", "0.23.0", "--cann", "9.1.0", *ISOLATED[:2]],
        {
            "--vllm-ascend": "glibc",
            "--cann": "glibc",
            "--into": "infile",
            "--index-url": "url",
            "--index": "index",
            "--matrix": "infile",
        },
        {},
    ),
    "matrix check": (["matrix", "check"], {"--matrix": "infile", "--index": "index"}, {}),
    "fleet report": (
        ["fleet", "report", "{t}/fleet-results", "--out", "{c}/report.json"],
        {"--out": "outfile", "": "results"},
        {},
    ),
    "bundle": (
        [
            "bundle",
            "--cann",
            "9.1.0",
            "--glibc",
            "2.31",
            "--arch",
            "aarch64",
            "--python",
            "3.11",
            *ISOLATED,
            "-o",
            "{c}/bundle",
        ],
        {
            "--cann": "cann",
            "--glibc": "glibc",
            "--arch": "arch",
            "--python": "pyversion",
            "--index-url": "url",
            "--index": "index",
            "--lock": "infile",
            "--matrix": "infile",
            "--soc": "cann",
            "--wheelhouse": "existingdir",
            "-o": "newdir",
        },
        {"ASCEND_SETUP_MATRIX": "infile"},
    ),
    "bundle --format tar": (
        [
            "bundle",
            "--cann",
            "9.1.0",
            "--glibc",
            "2.31",
            "--arch",
            "aarch64",
            "--python",
            "3.11",
            *ISOLATED,
            "--format",
            "tar",
            "-o",
            "{c}/bundle.tar",
        ],
        {"-o": "outfile"},
        {},
    ),
    "bundle verify": (["bundle", "verify", "{t}/bundle"], {"": "infile"}, {}),
    "install --bundle": (
        ["install", "--cann", "9.1.0", "--yes", "--workdir", "{c}/wd", *ISOLATED, "--mirror", "none"],
        {"--bundle": "infile"},
        {},
    ),
}
#: combinations that are refused for what they say, not for a value
CONFLICTS = [
    (
        "mirror-and-index-url",
        [
            "install",
            "--cann",
            "9.1.0",
            "--workdir",
            "{c}/wd",
            "--mirror",
            "http://a/simple",
            "--index-url",
            "http://b/simple",
            "--yes",
        ],
    ),
    ("global-without-apply", ["mirrors", "--only", "--candidate", DEAD, "--global", "--workdir", "{c}/wd"]),
    (
        "venv-without-apply",
        ["mirrors", "--only", "--candidate", DEAD, "--venv", "{t}/good-venv", "--workdir", "{c}/wd"],
    ),
    ("validate-two-files", ["matrix", "validate", "{t}/garbage.bin", "--matrix", "{t}/garbage.bin"]),
    ("only-without-candidates", ["mirrors", "--only", "--workdir", "{c}/wd"]),
    ("apply-without-target", ["mirrors", "--only", "--candidate", DEAD, "--apply", "--workdir", "{c}/wd"]),
]


def _cases() -> List[Tuple[str, List[str], Dict[str, str]]]:
    cases = []
    for command, (base, flags, variables) in COMMANDS.items():
        for flag, kind in flags.items():
            for label, value in KINDS[kind]:
                argv = [a for a in base]
                if flag and flag in argv and flag not in ("--index", "--candidate"):
                    argv[argv.index(flag) + 1] = value  # replace the base's own value
                elif not flag and any(p in argv for p in POSITIONALS):
                    argv[argv.index(next(p for p in POSITIONALS if p in argv))] = value  # the positional
                else:
                    argv += [flag, value] if flag else [value]
                cases.append((f"{command} {flag or 'FILE'}={label}", argv, {}))
        for variable, kind in variables.items():
            for label, value in KINDS[kind]:
                base_argv = [a for a in base]
                flag = {"ASCEND_SETUP_WORKDIR": "--workdir"}.get(variable)
                if flag in base_argv:  # the variable must be what decides: drop the flag
                    i = base_argv.index(flag)
                    del base_argv[i : i + 2]
                if value:
                    cases.append((f"{command} {variable}={label}", base_argv, {variable: value}))
    cases += [(f"conflict {name}", argv, {}) for name, argv in CONFLICTS]
    return cases


def _manifest(root: Path) -> Dict[str, Tuple[str, int]]:
    found = {}
    for path in sorted(root.rglob("*")):
        kind = "fifo" if path.is_fifo() else "dir" if path.is_dir() else "file"
        found[str(path.relative_to(root))] = (kind, path.stat().st_size if kind == "file" else 0)
    return found


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bad-input")
    t = root / "fixtures"
    t.mkdir()
    (t / "a-file").write_text("x\n")
    os.mkfifo(t / "a-fifo")
    (t / "a-dir").mkdir()
    (t / "garbage.bin").write_bytes(bytes(range(256)) * 4)
    venv_module.create(t / "good-venv", with_pip=False)
    (t / "broken-venv").mkdir()
    (t / "broken-venv" / "pyvenv.cfg").write_bytes(b"\x00\xff garbage = = =\n")
    (t / "model").mkdir()
    (t / "model" / "config.json").write_text('{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}')
    (t / "not-a-model.json").write_text('{"hello": "world"}')
    for name, text in (
        ("fleet-results", '{"host": "h", "rc": 0, "stderr": "", "audit": {"findings": []}}'),
        ("bad-results", "\x00 not json"),
        ("odd-results", '["a", "list"]'),
    ):
        (t / name).mkdir()
        (t / name / "h.audit.json").write_text(text)
    return root


def _run(tree: Path, index: int, argv: List[str], env: Dict[str, str]) -> subprocess.CompletedProcess:
    case = tree / f"case-{index}"
    home = case / "home"
    home.mkdir(parents=True)
    t = str(tree / "fixtures")
    args = [a.replace("{t}", t).replace("{c}", str(case)) for a in argv]
    extra = {k: v.replace("{t}", t) for k, v in env.items()}
    try:
        return subprocess.run(
            [sys.executable, "-m", "ascend_setup", *args],
            capture_output=True,
            text=True,
            env=clean_env(home, extra),
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, -1, "", "timed out (a FIFO read, or a wait without a deadline)")


def test_every_bad_input_is_exit_2_one_line_and_touches_nothing(tree: Path) -> None:
    cases = _cases()
    assert len(cases) > 150
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(lambda i=i, c=c: (c, _run(tree, i, c[1], c[2]))) for i, c in enumerate(cases)]
    before = {f"case-{i}/home": ("dir", 0) for i in range(len(cases))}
    broken = []
    for future in futures:
        (name, _argv, env), proc = future.result()
        lines = [l for l in proc.stderr.splitlines() if l.strip()]
        if proc.returncode != 2 or len(lines) != 1 or "Traceback" in proc.stderr:
            broken.append(f"{name}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
        elif env and not any(var in lines[0] for var in env):
            broken.append(f"{name}: the line does not name the variable: {lines[0]}")
    assert not broken, f"{len(broken)} of {len(cases)} broke the promise:\n" + "\n".join(broken)
    after = {k: v for k, v in _manifest(tree).items() if k.startswith("case-")}
    assert after == {**before, **{k: v for k, v in after.items() if k.count("/") == 0}}, sorted(
        set(after) - set(before) - {f"case-{i}" for i in range(len(cases))}
    )
    fixtures = _manifest(tree / "fixtures")
    assert fixtures["a-fifo"] == ("fifo", 0) and fixtures["a-file"] == ("file", 2)


@pytest.mark.parametrize(
    "name, value, says",
    [
        ("PIP_DEFAULT_TIMEOUT", "banana", "is not a timeout"),
        ("PIP_TIMEOUT", "-3", "is not a timeout"),
        ("PIP_INDEX_URL", "notaurl", "is not an http(s):// or file:// URL"),
    ],
)
def test_a_bad_pip_variable_is_named_as_such(cli, tmp_path, name: str, value: str, says: str) -> None:
    proc = cli("plan", "--cann", "9.1.0", "--glibc", "2.31", "--arch", "aarch64", "--python", "3.11", env={name: value})
    line = assert_one_line_error(proc)
    assert f"{name}={value!r}" in line and says in line


# -- a link planted where the install writes: refused by name, its target untouched ---------------------------

VICTIM_TEXT = b"the user's file: no link may make ascend-setup write here\n"


@pytest.mark.parametrize("planted", ["run.lock", "state.json", "logs", "logs/preflight.log"])
def test_install_refuses_a_link_at_each_file_it_writes_first(tmp_path: Path, planted: str) -> None:
    """The real install, as root: a link at run.lock, state.json, the logs directory or the first step's log."""
    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM_TEXT)
    workdir = tmp_path / "wd"
    link = workdir / planted
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim if planted != "logs" else tmp_path)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ascend_setup",
            "install",
            "--cann",
            "9.1.0",
            "--yes",
            "--workdir",
            str(workdir),
            *ISOLATED,
            "--mirror",
            "none",
        ],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path / "home"),
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert str(link) in last and "symbolic link" in last and "Traceback" not in proc.stderr
    assert victim.read_bytes() == VICTIM_TEXT and link.is_symlink()
    assert not (tmp_path / "preflight.log").exists()  # nothing went through the linked logs directory


def _later_writes(workdir: Path, venv: Path) -> Dict[str, Tuple[Path, Callable[[], object]]]:
    """What the install's later steps write, each through the function the step calls."""
    from ascend_setup.dists.venv_reader import RECORD_NAME, VenvRecord, write_venv_record
    from ascend_setup.index.download import download
    from ascend_setup.mirrors.apply import write_venv_config
    from ascend_setup.mirrors.choice import CACHE_NAME, save_cache
    from ascend_setup.resolve.lockfile import Lock, LockTarget, write_lock

    lock = Lock(
        cann="9.1.0",
        target=LockTarget(arch="aarch64", glibc="2.31", python="3.11"),
        indexes={"mirror": DEAD},
        inputs="0",
        packages=[],
    )
    return {
        "downloads/x.tar.gz": (
            workdir / "downloads" / "x.tar.gz",
            lambda: download([DEAD + "x"], workdir / "downloads" / "x.tar.gz", stall_seconds=1),
        ),
        "downloads/x.tar.gz.part": (
            workdir / "downloads" / "x.tar.gz.part",
            lambda: download([DEAD + "x"], workdir / "downloads" / "x.tar.gz", stall_seconds=1),
        ),
        "lock/<row>.txt": (workdir / "lock" / "9.1.0.txt", lambda: write_lock(lock, workdir / "lock" / "9.1.0.txt")),
        "mirrors.json": (workdir / CACHE_NAME, lambda: save_cache(workdir, {"key": {}})),
        "requirements": (
            workdir / "requirements" / "torch-stack.txt",
            lambda: atomic_write_text(workdir / "requirements" / "torch-stack.txt", "six==1.16.0\n"),
        ),
        "venv/pip.conf": (venv / "pip.conf", lambda: write_venv_config(venv, DEAD, [])),
        "venv/uv.toml": (venv / "uv.toml", lambda: write_venv_config(venv, DEAD, [])),
        "venv/ascend-setup.json": (
            venv / RECORD_NAME,
            lambda: write_venv_record(venv, VenvRecord(workdir=str(workdir))),
        ),
    }


@pytest.mark.parametrize(
    "planted",
    [
        "downloads/x.tar.gz",
        "downloads/x.tar.gz.part",
        "lock/<row>.txt",
        "mirrors.json",
        "requirements",
        "venv/pip.conf",
        "venv/uv.toml",
        "venv/ascend-setup.json",
    ],
)
def test_each_later_write_of_the_install_refuses_a_link(tmp_path: Path, planted: str) -> None:
    from ascend_setup.errors import BadInput

    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM_TEXT)
    workdir, venv = tmp_path / "wd", tmp_path / "venv"
    link, write = _later_writes(workdir, venv)[planted]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim)
    with pytest.raises(BadInput) as caught:
        write()
    assert str(link) in caught.value.message and "symbolic link" in caught.value.message
    assert victim.read_bytes() == VICTIM_TEXT and link.is_symlink()


# -- clean exits, the demo's lock, terminal escapes, the models' values ------------------------------------------


def _pip_temp_dirs(tmp: Path) -> List[Path]:
    """pip's `pip-*` temp dirs under `tmp`, looked for while pip and uv make and remove directories there
    (a directory that goes mid-walk is skipped, not an error)."""
    return [Path(top) / d for top, dirs, _ in os.walk(tmp) for d in dirs if d.startswith("pip-")]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_pip_leaves_nothing_in_tmpdir(tmp_path: Path, sig: signal.Signals) -> None:
    """The demo with pip; once pip has made its `pip-*` temp dirs, a signal; afterwards TMPDIR is empty."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ascend_setup", "demo", "--interrupt-at", "none", "--installer", "pip"],
        env=clean_env(tmp_path / "home", {"TMPDIR": str(tmp)}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        seen: List[Path] = []
        while not seen and time.monotonic() < deadline and proc.poll() is None:
            seen = _pip_temp_dirs(tmp)
            time.sleep(0.1)
        assert seen, "pip never made a temp dir under this run's TMPDIR"
        assert seen[0].relative_to(tmp).parts[0].startswith("ascend-setup-run-")  # inside the run's one root
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == 128 + sig
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert list(tmp.iterdir()) == [], "left behind: " + ", ".join(str(p) for p in tmp.rglob("*"))[:500]


def test_a_second_demo_in_the_same_workdir_is_refused_by_the_lock(tmp_path: Path) -> None:
    import fcntl

    workdir = tmp_path / "demo"
    workdir.mkdir()
    with open(workdir / "run.lock", "w") as handle:  # what a running demo holds
        fcntl.flock(handle, fcntl.LOCK_EX)
        proc = subprocess.run(
            [sys.executable, "-m", "ascend_setup", "demo", "--workdir", str(workdir), "--json"],
            capture_output=True,
            text=True,
            env=clean_env(tmp_path / "home"),
            timeout=60,
        )
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["exit"] == 3
    assert [p.name for p in workdir.iterdir()] == ["run.lock"]


def test_fleet_report_escapes_control_characters_of_host_names(tmp_path: Path) -> None:
    results = tmp_path / "fleet"
    results.mkdir()
    evil = "h\x1b]0;owned\x07\x1b[2J\u202e"
    (results / "h.audit.json").write_text(json.dumps({"host": evil, "rc": 3, "stderr": "boom\x1b[31m", "audit": {}}))
    proc = subprocess.run(
        [sys.executable, "-m", "ascend_setup", "fleet", "report", str(results)],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path / "home"),
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout and "\u202e" not in proc.stdout
    assert "\\x1b]0;owned\\x07" in proc.stdout and "\\u202e" in proc.stdout
    assert json.loads((results / "report.json").read_text())["hosts"][0]["host"] == evil  # the data keeps it raw


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--json", "--bogus"],
        ["plan", "--json"],
        ["fit", "--json"],
        ["install", "--cann", "9.1.0", "--installer", "conda", "--json"],
    ],
)
def test_argparse_errors_are_json_under_json(argv: List[str], tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ascend_setup", *argv],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path / "home"),
        timeout=60,
    )
    assert proc.returncode == 2 and len([l for l in proc.stderr.splitlines() if l.strip()]) == 1
    doc = json.loads(proc.stdout)
    assert set(doc) == {"error", "hint", "exit"} and doc["exit"] == 2 and doc["error"]


def _workdir_state(tmp_path: Path, options: Dict[str, object]) -> Path:
    workdir = tmp_path / "wd"
    workdir.mkdir()
    (workdir / "state.json").write_text(
        json.dumps({"format": "ascend-setup-state", "version": 1, "options": options, "steps": {}})
    )
    return workdir


@pytest.mark.parametrize(
    "options, words",
    [
        ({"cann": "9.1.0", "installer": "conda"}, "installer"),
        ({"cann": "9.1.0", "mirror": "ftp://mirror.invalid/simple"}, "mirror"),
        ({"cann": "9.1.0", "extra_index_urls": ["gopher://x.invalid/"]}, "extra_index_urls"),
        ({"cann": "not-a-version!"}, "cann"),
    ],
)
def test_resume_refuses_recorded_values_its_model_rejects(
    tmp_path: Path, options: Dict[str, object], words: str
) -> None:
    workdir = _workdir_state(tmp_path, options)
    before = (workdir / "state.json").read_bytes()
    proc = subprocess.run(
        [sys.executable, "-m", "ascend_setup", "resume", "--workdir", str(workdir), "--json"],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path / "home"),
        timeout=60,
    )
    assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["exit"] == 2
    assert (workdir / "state.json").read_bytes() == before
    assert sorted(p.name for p in workdir.iterdir()) == ["state.json"]


def _lock_with(**changes: object) -> str:
    from ascend_setup.resolve.lockfile import DATA_PREFIX, Lock, LockedPackage, LockTarget, lock_text

    lock = Lock(
        cann="9.1.0",
        target=LockTarget(arch="aarch64", glibc="2.31", python="3.11"),
        indexes={"mirror": DEAD},
        inputs="0",
        packages=[
            LockedPackage(
                name="six", version="1.16.0", outcome="wheel", index="mirror", url=DEAD + "six.whl", sha256="a" * 64
            )
        ],
    )
    data = lock.to_json()
    for dotted, value in changes.items():
        where = data
        *path, last = dotted.split("__")
        for part in path:
            where = where[int(part)] if part.isdigit() else where[part]
        where[last] = value
    head, _, rest = lock_text(lock).partition(DATA_PREFIX)
    return head + DATA_PREFIX + json.dumps(data) + "\n" + rest.split("\n", 1)[1]


@pytest.mark.parametrize(
    "change, words",
    [
        ({"packages__0__sha256": "zz"}, "sha256"),
        ({"packages__0__version": "not-a-version!"}, "version"),
        ({"packages__0__url": "ftp://x.invalid/six.whl"}, "url"),
        ({"indexes__mirror": "ftp://x.invalid/simple"}, "indexes"),
        ({"target__python": "three"}, "python"),
    ],
)
def test_a_lock_with_a_bad_value_is_refused_on_load(tmp_path: Path, change: Dict[str, object], words: str) -> None:
    from ascend_setup.errors import BadInput
    from ascend_setup.resolve.lockfile import read_lock

    path = tmp_path / "bad.lock"
    path.write_text(_lock_with(**change))
    with pytest.raises(BadInput) as caught:
        read_lock(path)
    assert words in caught.value.message


def test_a_lock_outside_the_rows_pythons_or_for_another_python_is_exit_2(tmp_path: Path) -> None:
    """Python 2.7 is outside every row; a 3.11 lock with a --python of another version is refused at the dry run."""
    from ascend_setup.host.interpreters import choose_interpreter
    from ascend_setup.host.machine import glibc_version
    from ascend_setup.matrix import load_matrix

    old = tmp_path / "old.lock"
    old.write_text(_lock_with(target__python="2.7", target__arch=platform.machine(), target__glibc=glibc_version()))
    env = clean_env(tmp_path / "home")
    base = ["install", "--cann", "9.1.0", "--dry-run", "--workdir", str(tmp_path / "wd"), *ISOLATED]
    proc = subprocess.run(
        [sys.executable, "-m", "ascend_setup", *base, "--lock", str(old)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 2 and "outside the row's range" in proc.stderr, proc.stderr
    # --python: one in the row's range (this interpreter may be below it: the tool runs on 3.8)
    python = choose_interpreter(load_matrix().rows["9.1.0"].python)
    other = "3.10" if python.minor != "3.10" else "3.11"
    lock = tmp_path / "other.lock"
    lock.write_text(_lock_with(target__python=other, target__arch=platform.machine(), target__glibc=glibc_version()))
    proc = subprocess.run(
        [sys.executable, "-m", "ascend_setup", *base, "--lock", str(lock), "--python", python.path],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 2 and f"is for Python {other}, but --python" in proc.stderr, proc.stderr
    assert not (tmp_path / "wd").exists()


def test_matrix_validate_refuses_an_ftp_index(tmp_path: Path) -> None:
    from ascend_setup.matrix.load import PACKAGED_MATRIX

    text = PACKAGED_MATRIX.read_text()
    import yaml

    data = yaml.safe_load(text)
    name = next(iter(data["indexes"]))
    bad = tmp_path / "m.yaml"
    bad.write_text(text.replace(data["indexes"][name], "ftp://index.invalid/simple", 1))
    proc = subprocess.run(
        [sys.executable, "-m", "ascend_setup", "matrix", "validate", str(bad)],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path / "home"),
        timeout=60,
    )
    assert proc.returncode == 2 and "is not an http(s):// or file:// URL" in proc.stderr, proc.stderr


def test_a_workdir_owned_by_another_user_is_refused_for_writing(tmp_path: Path) -> None:
    workdir = tmp_path / "shared"
    workdir.mkdir()
    os.chown(workdir, 4321, 4321)
    base = ["install", "--cann", "9.1.0", "--yes", "--workdir", str(workdir), *ISOLATED, "--mirror", "none"]
    proc = subprocess.run(
        [sys.executable, "-m", "ascend_setup", *base],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path / "home"),
        timeout=60,
    )
    assert proc.returncode == 2 and "owned by uid 4321" in proc.stderr, proc.stderr
    assert list(workdir.iterdir()) == []
    os.chown(workdir, os.geteuid(), os.getegid())
    os.chmod(workdir, 0o777)
    proc = subprocess.run(
        [sys.executable, "-m", "ascend_setup", *base],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path / "home"),
        timeout=60,
    )
    assert proc.returncode == 2 and "writable by every user" in proc.stderr, proc.stderr
    link = tmp_path / "link"
    os.chmod(workdir, 0o755)
    link.symlink_to(workdir)
    proc = subprocess.run(
        [sys.executable, "-m", "ascend_setup", "status", "--workdir", str(link), "--json"],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path / "home"),
        timeout=60,
    )
    assert str(workdir) in proc.stdout  # resolved once: the real directory is what the run uses
