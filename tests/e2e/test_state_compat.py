"""A state.json written by the release before the typed install session still resumes: its recorded options
replay, and the outputs its steps recorded are read back by the steps that follow."""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from typing import Optional

import pytest

from ascend_setup.engine.step import fingerprint
from ascend_setup.host.interpreters import probe
from ascend_setup.host.machine import glibc_version

#: The pipeline of that release (step, the steps it depends on), in order: its fingerprints chain along it.
PIPELINE = [
    ("preflight", ()),
    ("mirror", ("preflight",)),
    ("resolve", ("preflight", "mirror")),
    ("venv", ("preflight", "mirror", "resolve")),
    ("cann-python-deps", ("venv",)),
    ("torch-stack", ("cann-python-deps",)),
    ("vllm", ("torch-stack",)),
    ("plugin-deps", ("vllm",)),
    ("triton", ("plugin-deps",)),
    ("vllm-ascend", ("triton",)),
    ("verify", ("vllm-ascend",)),
]

#: Written by a stub-world `install --installer uv` of that release, with this machine's values replaced by marks.
OLD_STATE = Path(__file__).resolve().parents[1] / "data" / "state" / "state-0.json"


def old_state_for(stack, workdir: Path, installer: Optional[str] = "uv") -> str:
    """The recorded file, as that release would have written it for this stack, workdir and host, its options
    naming `installer` (None: the key left out, as a record that predates it); its steps ran that one (pip when
    the key is left out, the default then)."""
    interp = probe(sys.executable)
    marked: dict = {}
    marks = {
        "@WORKDIR@": str(workdir),
        "@CANN@": str(stack.cann.root),
        "@MAIN@": stack.main.url,
        "@ASCEND@": stack.ascend.url,
        "@PYTORCH_CPU@": stack.pytorch_cpu.url,
        "@PYTHON@": sys.executable,
        "@ARCH@": platform.machine(),
        "@GLIBC@": glibc_version(),
        "@PYTHON_VERSION@": interp.version,
        "@PYTHON_MINOR@": interp.minor,
    }

    def placed(value):
        if isinstance(value, str):
            for mark, real in marks.items():
                value = value.replace(mark, real)
            return value
        if isinstance(value, list):
            return [placed(v) for v in value]
        return {k: placed(v) for k, v in value.items()} if isinstance(value, dict) else value

    data = json.loads(OLD_STATE.read_text())
    if installer is None:
        del data["options"]["installer"]
    else:
        data["options"]["installer"] = installer
    known = {}
    for name, depends_on in PIPELINE:  # the file's fingerprints are of its marked inputs: make them again here
        record = data["steps"][name]
        upstream = tuple(known[d] for d in depends_on)
        assert fingerprint(record["inputs"], tuple(marked[d] for d in depends_on)) == record["fingerprint"]
        marked[name] = record["fingerprint"]
        record["inputs"] = placed(record["inputs"])
        if "installer" in record["inputs"]:
            record["inputs"]["installer"] = installer or "pip"
        record["fingerprint"] = known[name] = fingerprint(record["inputs"], upstream)
    return json.dumps(placed(data))


@pytest.mark.parametrize("recorded, resumed", [("uv", "uv"), ("pip", "pip"), (None, "pip")])
def test_a_state_file_of_the_previous_release_resumes(
    wheel_stack, tmp_path: Path, recorded: Optional[str], resumed: str
) -> None:
    """With the installer it recorded: an install that started with pip (named, or the default of a release
    that did not record it) keeps pip now that uv is the default."""
    workdir = tmp_path / "wd"
    workdir.mkdir()
    (workdir / "state.json").write_text(old_state_for(wheel_stack, workdir, recorded))
    proc = wheel_stack.cli("resume", "--workdir", str(workdir), "--json")
    assert proc.returncode == 0, proc.stderr[-4000:]
    steps = {s["name"]: s["state"] for s in json.loads(proc.stdout)["steps"]}
    assert set(steps.values()) == {"done"}, steps
    # preflight's and mirror's recorded outputs still hold, so they are not run again: the steps after them
    # (the lock, the venv, the packages) ran on what the old file recorded
    assert "preflight (done)" in proc.stderr and "mirror (done)" in proc.stderr, proc.stderr[-3000:]
    assert "→ resolve" in proc.stderr and (workdir / "venv" / "bin" / "python").exists()
    assert next((workdir / "lock").glob("*.txt")).name.startswith(f"9.1.0-{platform.machine()}-")
    log = (workdir / "logs" / "torch-stack.log").read_text()
    assert f"installer: {resumed}" in log and f"installer: {({'uv', 'pip'} - {resumed}).pop()}" not in log
