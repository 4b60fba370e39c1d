"""Before anything starts, every problem at once: a model server takes minutes to fail on what a second of
checking finds (a wrong version, a disabled Triton that crashes the first request, a missing libatb.so, a busy
card, a half-downloaded shard)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional

from ascend_setup.dists.versions import PinVerdict, pin_verdict
from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.fit.model_files import INDEX, ModelFiles
from ascend_setup.host.npu import find_npu_smi, npu_smi_env
from ascend_setup.matrix.models import Row
from ascend_setup.utils.procs import capture

#: Run in the venv with CANN's environment. The versions come from metadata, the package directory from the
#: import system without importing vllm_ascend (that needs an NPU); HAS_TRITON is vLLM's own verdict.
PROBE = r'''
import importlib.metadata as md, importlib.util, json
out = {}
for dist in ("vllm", "vllm-ascend"):
    try:
        out[dist] = md.version(dist)
    except md.PackageNotFoundError:
        out[dist] = None
spec = importlib.util.find_spec("vllm_ascend")
out["vllm_ascend_dir"] = list(spec.submodule_search_locations)[0] if spec and spec.submodule_search_locations else None
try:
    from vllm.triton_utils import HAS_TRITON
    out["has_triton"] = bool(HAS_TRITON)
except Exception as exc:
    out["has_triton"] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(out))
'''

SERVED = ("vllm", "vllm-ascend")

#: A process row of `npu-smi info`: | NPU  Chip | Process id | Process name | Process memory(MB) |
_PROCESS_ROW = re.compile(r"^\|\s*(\d+)\s+\d+\s+\|\s*(\d+)\s+\|\s*(\S+)\s+\|\s*(\d+)\s*\|", re.MULTILINE)


@dataclass
class VenvFacts:
    versions: Dict[str, Optional[str]]
    plugin_dir: Optional[Path]
    has_triton: object  # True, False, or the import's error


def venv_facts(python: Path, env: Mapping[str, str]) -> VenvFacts:
    proc = capture([python, "-c", PROBE], env=env, timeout=300)
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        raise AscendSetupError(
            f"the venv's Python ({python}) could not run the serve check: {tail[0]}",
            hint="run 'ascend-setup install' (or 'audit --venv') on it first",
        ) from None
    return VenvFacts(
        {d: out.get(d) for d in ("vllm", "vllm-ascend")},
        Path(out["vllm_ascend_dir"]) if out.get("vllm_ascend_dir") else None,
        out.get("has_triton"),
    )


def card_processes(driver_root: Optional[str]) -> Dict[int, List[str]]:
    """NPU index -> the processes npu-smi lists on it ("pid name"); empty when npu-smi is absent."""
    exe = find_npu_smi(driver_root)
    if exe is None:
        return {}
    try:
        out = subprocess.run(
            [exe, "info"], env=npu_smi_env(driver_root), capture_output=True, text=True, timeout=20
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    found: Dict[int, List[str]] = {}
    for match in _PROCESS_ROW.finditer(out):
        found.setdefault(int(match.group(1)), []).append(f"{match.group(2)} {match.group(3)}")
    return found


def resolvable(library: str, env: Mapping[str, str]) -> bool:
    """Whether the dynamic loader would find `library` on LD_LIBRARY_PATH (or in the system's cache)."""
    for directory in env.get("LD_LIBRARY_PATH", "").split(":"):
        if directory and (Path(directory) / library).exists():
            return True
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return f"{library} " in out


def shard_problems(model: Path, files: ModelFiles) -> List[str]:
    """Every shard present at the size its own header implies, and no download still running or cut short."""
    found = []
    for shard in files.shards:
        ends = [t["data_offsets"][1] for n, t in shard.header.items() if n != "__metadata__"]
        path = model / shard.name
        with path.open("rb") as handle:
            header_len = int.from_bytes(handle.read(8), "little")
        want = 8 + header_len + max(ends, default=0)
        if shard.size != want:
            found.append(
                f"shard {shard.name} is {shard.size} bytes, its header says {want}: an interrupted "
                "download (ascend-setup model fetch resumes it)"
            )
    found += [f"{p.name} is a partial download" for p in sorted(model.glob("*.part"))]
    if not files.shards and not (model / INDEX).exists():
        found.append(f"no *.safetensors weights in {model}")
    return found


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def check_port(port: int) -> None:
    if not 1 <= port <= 65535:
        raise BadInput(f"--port {port} is not a TCP port")
    if not port_free(port):
        raise BadInput(f"--port {port} is in use", hint="pick another port with --port")


def version_verdicts(row: Row, facts: VenvFacts) -> List[PinVerdict]:
    """vllm and vllm-ascend in the venv against the row's pins (the one policy: post releases and source
    builds of the pinned release pass, said so); what both preflight and the dry run report."""
    return [pin_verdict(dist, facts.versions.get(dist), row.packages[dist]) for dist in SERVED]


def preflight(
    *,
    row: Row,
    facts: VenvFacts,
    device: Optional[str],
    env: Mapping[str, str],
    cards: List[int],
    busy: Dict[int, List[str]],
    model: Path,
    files: ModelFiles,
) -> None:
    """AscendSetupError (exit 1) listing every problem found, or nothing (the version notes are the caller's to
    say, from `version_verdicts`)."""
    found = [v.note for v in version_verdicts(row, facts) if not v.accepted]
    if device in ("A2", "A3") and facts.has_triton is not True:
        why = "False" if facts.has_triton is False else facts.has_triton
        found.append(
            f"vllm.triton_utils.HAS_TRITON is {why} on an {device} host: the first request will crash with "
            "'function' object is not subscriptable (upstream triton shadows triton-ascend); fix: pip "
            f"uninstall -y triton triton-ascend, then install triton-ascend=={row.packages['triton-ascend']}"
        )
    if not resolvable("libatb.so", env):
        found.append(
            "libatb.so is not resolvable with CANN's environment: install NNAL and source "
            "/usr/local/Ascend/nnal/atb/set_env.sh (or give --cann-home where it is)"
        )
    for card in cards:
        if busy.get(card):
            found.append(f"card {card} is busy: npu-smi lists {', '.join(busy[card])} on it")
    found += shard_problems(model, files)
    if found:
        raise AscendSetupError(
            f"serve preflight: {len(found)} problem(s): " + "; ".join(found), hint="fix each, then run serve again"
        )
