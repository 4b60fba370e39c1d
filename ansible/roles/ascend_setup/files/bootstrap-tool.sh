#!/bin/sh
# Install ascend-setup from WHEEL into a venv of its own under DIR (its dependencies from INDEX, else from
# the host's pip configuration). PYTHON makes the venv; empty: the newest python3.X >= 3.8 on PATH.
# Reinstalls only when the wheel differs from the one installed last. Prints the tool's path last, and
# "changed" before it when anything was installed.
set -eu
dir=$1 wheel=$2 python=$3 index=$4
venv="$dir/venv"
changed=""
if [ ! -x "$venv/bin/python" ]; then
    if [ -z "$python" ]; then
        for minor in 3.14 3.13 3.12 3.11 3.10 3.9 3.8; do
            if command -v "python$minor" >/dev/null 2>&1; then
                python=$(command -v "python$minor")
                break
            fi
        done
    fi
    if [ -z "$python" ]; then
        echo "no python3.8 or newer on PATH for ascend-setup itself: install one (on Ubuntu 20.04:" \
             "apt install python3.8-venv) or set ascend_tool_python" >&2
        exit 1
    fi
    "$python" -m venv --clear "$venv.partial"  # ours: a venv cut off by a stop is made again
    mv "$venv.partial" "$venv"
    changed=1
fi
sha=$(sha256sum "$wheel" | cut -d' ' -f1)
if [ "$(cat "$dir/wheel.sha256" 2>/dev/null || true)" != "$sha" ]; then
    set -- --quiet --disable-pip-version-check
    if [ -n "$index" ]; then
        set -- "$@" --index-url "$index"
    fi
    "$venv/bin/python" -m pip install "$@" "$wheel"  # its dependencies, and the tool when it is new here
    "$venv/bin/python" -m pip install "$@" --no-deps --force-reinstall "$wheel"  # the tool, same version or not
    echo "$sha" > "$dir/wheel.sha256"
    changed=1
fi
"$venv/bin/ascend-setup" --version >/dev/null
if [ -n "$changed" ]; then
    echo changed
fi
echo "$venv/bin/ascend-setup"
