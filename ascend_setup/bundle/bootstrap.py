"""bootstrap.sh: the one command an air-gapped host runs. It checks the tool's files against their sha256,
makes a venv for the tool with any Python >= 3.8 it finds, installs the tool from the bundle with no index at
all, and runs `install --bundle` on the bundle it sits in (arguments are passed on: --soc, --workdir, ...)."""

from __future__ import annotations

from pathlib import Path
from typing import List

from ascend_setup.bundle.manifest import BundleFile, Manifest
from ascend_setup.utils.files import atomic_write_text

SUMS = "SHA256SUMS"

SCRIPT = """#!/bin/sh
# Made by ascend-setup {version} for CANN {cann} on {arch} / glibc {glibc} / Python {python}.
# Installs this bundle on this host with no package index at all:
#   sh bootstrap.sh [--workdir DIR] [--soc SOC_VERSION] [any other 'ascend-setup install' flag]
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
PY="${{PYTHON:-}}"
if [ -z "$PY" ]; then
    for candidate in python{python} python3.13 python3.12 python3.11 python3.10 python3.9 python3.8 python3; do
        if command -v "$candidate" >/dev/null 2>&1 && \\
                "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 8))' 2>/dev/null; then
            PY=$(command -v "$candidate"); break
        fi
    done
fi
if [ -z "$PY" ]; then
    echo "bootstrap.sh: no Python >= 3.8 found; set PYTHON=/path/to/python3" >&2; exit 2
fi
if [ -n "${{ASCEND_SETUP_WORKDIR:-}}" ]; then WORK="$ASCEND_SETUP_WORKDIR"
elif [ -d /mnt/workspace ] && [ -w /mnt/workspace ]; then WORK=/mnt/workspace/ascend-setup
else WORK="$HOME/ascend-setup"; fi
(cd "$HERE/tool" && sha256sum --quiet -c {sums}) || {{
    echo "bootstrap.sh: the tool's files in $HERE/tool do not match their sha256 (see above)" >&2; exit 1; }}
TOOL="$WORK/tool-venv"
[ -x "$TOOL/bin/python" ] || "$PY" -m venv "$TOOL"
PIP_CONFIG_FILE=/dev/null "$TOOL/bin/python" -m pip install --quiet --disable-pip-version-check --no-index \\
    --find-links "$HERE/tool" ascend-setup=={version}
exec "$TOOL/bin/ascend-setup" install --cann {cann} --bundle "$HERE" --workdir "$WORK" --yes "$@"
"""


def bootstrap_text(manifest: Manifest) -> str:
    t = manifest.target
    return SCRIPT.format(
        version=manifest.tool_version, cann=manifest.cann, arch=t.arch, glibc=t.glibc, python=t.python, sums=SUMS
    )


def write_checksums(directory: Path, files: List[BundleFile], root: Path) -> Path:
    """`sha256sum -c` input for the tool's files (the script checks them before it installs anything)."""
    lines = [f"{f.sha256}  {(root / f.path).relative_to(directory).as_posix()}" for f in files]
    path = directory / SUMS
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path
