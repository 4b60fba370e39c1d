"""The field report's HBM copy measurement, and on an NPU the device memory torch_npu reports (its total_memory,
what vLLM budgets from, and what a new process finds already in use: in_use_memory), run inside the installed
venv with CANN's environment.

A 2 GiB fp16 tensor, 3 warm-up copies, then 20 timed copies with synchronisation: 2 x bytes / time.
On a 910B3 it gave 1267 GB/s where paper figures said 800. `--device cpu` runs the same script (with
torch, else numpy, else plain memory copies), so the code path is tested on machines without an NPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Mapping, Optional, Tuple

from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.utils.files import atomic_write_text
from ascend_setup.utils.procs import capture

WARMUP, TIMED = 3, 20

SCRIPT = r'''
import json, sys, time
device, size = sys.argv[1], int(sys.argv[2])
backend, memory = None, {}
try:
    import torch
    if device.startswith("npu"):
        import torch_npu  # noqa: F401
        torch.npu.set_device(device)
        free, total = torch.npu.mem_get_info()  # before its own tensors: its context and what the card held
        memory = {"total_memory": total, "in_use_memory": total - free}
    src = torch.ones(size // 2, dtype=torch.float16, device=device)
    dst = torch.empty_like(src)
    sync = torch.npu.synchronize if device.startswith("npu") else (lambda: None)
    copy = lambda: dst.copy_(src)
    backend = "torch"
except ImportError:
    if device != "cpu":
        raise
if backend is None:
    try:
        import numpy as np
        src = np.ones(size // 2, dtype=np.float16)
        dst = np.empty_like(src)
        copy = lambda: np.copyto(dst, src)
        backend = "numpy"
    except ImportError:
        src, dst = memoryview(bytearray(b"\x01" * size)), memoryview(bytearray(size))
        def copy():
            dst[:] = src
        backend = "python"
    sync = lambda: None
for _ in range(WARMUP):
    copy()
sync()
start = time.perf_counter()
for _ in range(TIMED):
    copy()
sync()
seconds = time.perf_counter() - start
result = {"device": device, "backend": backend, "bytes": size, "copies": TIMED, "seconds": seconds,
          "gbps": 2 * size * TIMED / seconds / 1e9}
result.update(memory)  # on an NPU: what vLLM multiplies by --gpu-memory-utilization, and what a worker finds taken
print(json.dumps(result))
'''.replace("WARMUP", str(WARMUP)).replace("TIMED", str(TIMED))


def run_probe(python: Path, device: str, size_bytes: int, env: Optional[Mapping[str, str]] = None) -> Dict[str, object]:
    """Measure in the interpreter `python` (the installed venv's); raises with the interpreter's own words."""
    proc = capture([python, "-c", SCRIPT, device, str(size_bytes)], env=env, timeout=900)
    try:
        measured: Dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])  # SCRIPT's one line
        return measured
    except (ValueError, IndexError):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        raise AscendSetupError(
            f"the copy measurement on {device} failed: {tail[0]}",
            hint="an NPU device needs the installed venv (torch, torch_npu) and CANN's driver",
        ) from None


def save_probe(workdir: Path, result: Dict[str, object]) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "probe.json"
    atomic_write_text(path, json.dumps(result, indent=2) + "\n")
    return path


def probe_here(
    workdir: Optional[str], venv: Optional[str], cann_home: Optional[str], device: str, size_bytes: int
) -> Tuple[Dict[str, object], Path]:
    """`probe`: measure in the installed venv (an NPU with CANN's environment), save it where fit reads it; (the
    measurement, where it was saved)."""
    from ascend_setup.dists.venv_reader import read_pyvenv_cfg, venv_python
    from ascend_setup.engine.workdir import Workdir
    from ascend_setup.host.cann import primary_cann
    from ascend_setup.host.setenv import capture_env
    from ascend_setup.utils.paths import CANN_HOME, VENV, resolve_workdir

    where = resolve_workdir(workdir)
    path = VENV.path(venv)[0] or Workdir(where).venv
    if read_pyvenv_cfg(path) is None or not venv_python(path).exists():
        raise BadInput(f"--venv {path} is not a working venv", hint="run 'ascend-setup install' first, or pass --venv")
    env = None
    if device.startswith("npu"):
        found = primary_cann(CANN_HOME.value(cann_home)[0])
        env = capture_env(found.set_env_scripts()).apply() if found else None
    result = run_probe(venv_python(path), device, size_bytes, env=env)
    return result, save_probe(where, result)
