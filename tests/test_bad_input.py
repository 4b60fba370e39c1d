"""Every command, every class of bad value: exit 2, one line on stderr, no traceback, nothing on disk changed.

The cases are generated: each command's flags (and the ASCEND_SETUP_* variables behind them) are given
every value of their kind that cannot be used. The whole tree's manifest is compared before and after.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv as venv_module
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from conftest import assert_one_line_error, clean_env

DEAD = "http://127.0.0.1:9/simple/"  # refused at once: a case that wrongly goes on fails fast, offline

#: value kinds -> (label, value) pairs; "{t}" is the fixtures' directory
KINDS: Dict[str, List[Tuple[str, str]]] = {
    "newdir": [("under-a-file", "{t}/a-file/sub"), ("a-file", "{t}/a-file"), ("a-fifo", "{t}/a-fifo"),
               ("uncreatable", "/proc/ascend-setup-x"), ("empty", "")],
    "readdir": [("a-file", "{t}/a-file"), ("a-fifo", "{t}/a-fifo"), ("empty", "")],
    "existingdir": [("missing", "{t}/missing"), ("a-file", "{t}/a-file"), ("a-fifo", "{t}/a-fifo"), ("empty", "")],
    "infile": [("missing", "{t}/missing.yaml"), ("a-dir", "{t}/a-dir"), ("a-fifo", "{t}/a-fifo"),
               ("garbage", "{t}/garbage.bin"), ("device", "/dev/zero"), ("empty", "")],
    "outfile": [("a-dir", "{t}/a-dir"), ("a-fifo", "{t}/a-fifo"), ("under-a-file", "{t}/a-file/x.lock")],
    "exe": [("missing", "{t}/python3.11"), ("a-dir", "{t}/a-dir"), ("not-python", "/bin/true"),
            ("garbage", "{t}/garbage.bin"), ("a-fifo", "{t}/a-fifo"), ("empty", "")],
    "pyversion": [("word", "three"), ("too-old", "3.9"), ("out-of-range", "3.13"), ("exe-missing", "{t}/nopython")],
    "url": [("ftp", "ftp://x/simple"), ("words", "not a url"), ("empty", "")],
    "index": [("no-url", "ascend"), ("unknown-name", "nope=http://x/simple"), ("bad-url", "ascend=ftp://x")],
    "cann": [("unknown", "7.0.0"), ("garbage", "9.1.0; rm -rf /"), ("empty", "")],
    "glibc": [("words", "two"), ("empty", "")],
    "arch": [("sparc", "sparc"), ("empty", "")],
    "number": [("word", "fast"), ("negative", "-1"), ("huge", "1e9")],
    "venv": [("missing", "{t}/missing"), ("a-file", "{t}/a-file"), ("a-fifo", "{t}/a-fifo"),
             ("garbage-cfg", "{t}/broken-venv")],
    "model": [("missing", "{t}/missing"), ("garbage", "{t}/garbage.bin"), ("a-fifo", "{t}/a-fifo"),
              ("no-config", "{t}/a-dir"), ("not-a-model", "{t}/not-a-model.json")],
    "card": [("unknown", "910C"), ("garbage", "x; y")],
    "fraction": [("word", "most"), ("zero", "0"), ("above-one", "1.5")],
    "results": [("missing", "{t}/missing"), ("a-file", "{t}/a-file"), ("a-fifo", "{t}/a-fifo"),
                ("no-results", "{t}/a-dir"), ("garbage", "{t}/bad-results"), ("not-a-result", "{t}/odd-results")],
}
#: Positional arguments that the "" flag of a command replaces.
POSITIONALS = ("{t}/model", "{t}/fleet-results")
ISOLATED = ["--index-url", DEAD, "--index", f"ascend={DEAD}", "--index", f"pytorch-cpu={DEAD}"]
#: command -> (base arguments, {flag: kind}, {ASCEND_SETUP_* variable: kind})
COMMANDS: Dict[str, Tuple[List[str], Dict[str, str], Dict[str, str]]] = {
    "install": (["install", "--cann", "9.1.0", "--yes", "--workdir", "{c}/wd", *ISOLATED, "--mirror", "none"],
                {"--workdir": "newdir", "--venv": "newdir", "--python": "exe", "--cann-home": "existingdir",
                 "--extra-index-url": "url", "--lock": "infile", "--matrix": "infile", "--cann": "cann",
                 "--index": "index", "--installer": "arch", "--soc": "cann"},
                {"ASCEND_SETUP_WORKDIR": "newdir", "ASCEND_SETUP_VENV": "newdir", "ASCEND_SETUP_PYTHON": "exe",
                 "ASCEND_SETUP_CANN_HOME": "existingdir", "ASCEND_SETUP_MATRIX": "infile"}),
    "install --dry-run": (["install", "--cann", "9.1.0", "--dry-run", "--workdir", "{c}/wd", *ISOLATED],
                          {"--workdir": "newdir", "--venv": "newdir", "--python": "exe", "--index-url": "url",
                           "--mirror": "url"}, {}),
    "resume": (["resume"], {"--workdir": "existingdir"}, {"ASCEND_SETUP_WORKDIR": "existingdir"}),
    "status": (["status"], {"--workdir": "existingdir"}, {"ASCEND_SETUP_WORKDIR": "existingdir"}),
    "plan": (["plan", "--cann", "9.1.0", "--glibc", "2.31", "--arch", "aarch64", "--python", "3.11", *ISOLATED],
             {"--cann": "cann", "--glibc": "glibc", "--arch": "arch", "--python": "pyversion", "--index-url": "url",
              "--index": "index", "--lock": "outfile", "--matrix": "infile", "--soc": "cann"},
             {"ASCEND_SETUP_MATRIX": "infile"}),
    "audit": (["audit", "--venv", "{t}/good-venv"],
              {"--venv": "venv", "--lock": "infile", "--cann": "cann", "--index": "index", "--matrix": "infile",
               "--soc": "cann"},
              {"ASCEND_SETUP_MATRIX": "infile"}),
    "doctor": (["doctor", "--workdir", "{c}/wd"],
               {"--workdir": "readdir", "--venv": "readdir", "--cann-home": "existingdir", "--python": "exe",
                "--cann": "cann", "--index": "index", "--matrix": "infile", "--soc": "cann", "--index-url": "url"},
               {"ASCEND_SETUP_WORKDIR": "readdir", "ASCEND_SETUP_VENV": "readdir", "ASCEND_SETUP_PYTHON": "exe",
                "ASCEND_SETUP_CANN_HOME": "existingdir"}),
    "mirrors": (["mirrors", "--only", "--candidate", DEAD, "--workdir", "{c}/wd"],
                {"--budget": "number", "--candidate": "url", "--python": "pyversion", "--workdir": "readdir",
                 "--index": "index", "--matrix": "infile", "--cann": "cann"}, {}),
    "mirrors --apply": (["mirrors", "--only", "--candidate", DEAD, "--workdir", "{c}/wd", "--apply"],
                        {"--venv": "venv"}, {}),
    "matrix show": (["matrix", "show", "9.1.0"], {"--matrix": "infile"}, {"ASCEND_SETUP_MATRIX": "infile"}),
    "fit": (["fit", "{t}/model", "--workdir", "{c}/wd"],
            {"": "model", "--card": "card", "--context": "number", "--gpu-memory-utilization": "fraction",
             "--kv-dtype": "arch", "--bandwidth": "number", "--workdir": "readdir"}, {}),
    "probe": (["probe", "--device", "cpu", "--gib", "0.01", "--venv", "{t}/good-venv", "--workdir", "{c}/wd"],
              {"--venv": "venv", "--gib": "number"}, {}),
    "matrix validate": (["matrix", "validate"], {"": "infile"}, {}),
    "matrix derive": (["matrix", "derive", "--vllm-ascend", "0.23.0", "--cann", "9.1.0", *ISOLATED[:2]],
                      {"--vllm-ascend": "glibc", "--cann": "glibc", "--into": "infile", "--index-url": "url",
                       "--index": "index", "--matrix": "infile"}, {}),
    "matrix check": (["matrix", "check"], {"--matrix": "infile", "--index": "index"}, {}),
    "fleet report": (["fleet", "report", "{t}/fleet-results", "--out", "{c}/report.json"],
                     {"--out": "outfile", "": "results"}, {}),
}
#: combinations that are refused for what they say, not for a value
CONFLICTS = [
    ("mirror-and-index-url", ["install", "--cann", "9.1.0", "--workdir", "{c}/wd", "--mirror", "http://a/simple",
                              "--index-url", "http://b/simple", "--yes"]),
    ("global-without-apply", ["mirrors", "--only", "--candidate", DEAD, "--global", "--workdir", "{c}/wd"]),
    ("venv-without-apply", ["mirrors", "--only", "--candidate", DEAD, "--venv", "{t}/good-venv", "--workdir", "{c}/wd"]),
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
                    del base_argv[i:i + 2]
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
    for name, text in (("fleet-results", '{"host": "h", "rc": 0, "stderr": "", "audit": {"findings": []}}'),
                       ("bad-results", "\x00 not json"), ("odd-results", '["a", "list"]')):
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
        return subprocess.run([sys.executable, "-m", "ascend_setup", *args], capture_output=True, text=True,
                              env=clean_env(home, extra), timeout=60, stdin=subprocess.DEVNULL)
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
        (name, argv, env), proc = future.result()
        lines = [l for l in proc.stderr.splitlines() if l.strip()]
        if proc.returncode != 2 or len(lines) != 1 or "Traceback" in proc.stderr:
            broken.append(f"{name}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
        elif env and not any(var in lines[0] for var in env):
            broken.append(f"{name}: the line does not name the variable: {lines[0]}")
    assert not broken, f"{len(broken)} of {len(cases)} broke the promise:\n" + "\n".join(broken)
    after = {k: v for k, v in _manifest(tree).items() if k.startswith("case-")}
    assert after == {**before, **{k: v for k, v in after.items() if k.count("/") == 0}}, \
        sorted(set(after) - set(before) - {f"case-{i}" for i in range(len(cases))})
    fixtures = _manifest(tree / "fixtures")
    assert fixtures["a-fifo"] == ("fifo", 0) and fixtures["a-file"] == ("file", 2)


@pytest.mark.parametrize("name, value, says", [("PIP_DEFAULT_TIMEOUT", "banana", "is not a timeout"),
                                               ("PIP_TIMEOUT", "-3", "is not a timeout")])
def test_a_bad_pip_variable_is_named_as_such(cli, tmp_path, name: str, value: str, says: str) -> None:
    proc = cli("plan", "--cann", "9.1.0", "--glibc", "2.31", "--arch", "aarch64", "--python", "3.11",
               env={name: value})
    line = assert_one_line_error(proc)
    assert f"{name}={value!r}" in line and says in line
