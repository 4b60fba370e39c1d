"""`bundle` for aarch64 / glibc 2.31 / Python 3.11 on the real index (whatever pip is configured with): it holds
every file of the closure a reachable index serves and names exactly those it could not fetch, exit 1."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse

import pytest
import requests

from ascend_setup.resolve.lockfile import read_lock


def _reachable(url: str) -> bool:
    try:
        requests.head(url, timeout=10, allow_redirects=True)
        return True
    except requests.RequestException:
        return False


@pytest.mark.live
def test_bundle_for_aarch64_holds_what_the_reachable_indexes_serve(cli, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    proc = cli(
        "bundle",
        "--cann",
        "9.1.0",
        "--arch",
        "aarch64",
        "--glibc",
        "2.31",
        "--python",
        "3.11",
        "-o",
        str(out),
        "--json",
        timeout=3600,
    )
    assert proc.returncode in (0, 1), proc.stderr
    data = json.loads(proc.stdout)
    lock = read_lock(out / "lock.txt")
    hosts = {urlparse(p.url or p.index_url or "").netloc for p in lock.packages}
    down = {h for h in hosts if h and not _reachable(f"https://{h}/")}
    manifest = json.loads((out / "manifest.json").read_text())
    held = {f["package"] for f in manifest["files"] if f["role"] == "package"}
    missing = {m["package"] for m in manifest["missing"]}
    for p in lock.packages:
        served = p.outcome != "unavailable" and urlparse(p.url or "").netloc not in down
        assert (p.name in held) == served and (p.name in missing) == (not served), p.name
    archives = [m for m in manifest["missing"] if m["package"] not in {p.name for p in lock.packages}]
    assert all(urlparse(m["index"]).netloc in down or not _reachable(m["index"]) for m in archives), archives
    assert proc.returncode == (1 if missing else 0)
    verify = cli("bundle", "verify", str(out), "--json")
    assert json.loads(verify.stdout)["problems"] == []
    tool = sorted(f["path"].split("/")[-1] for f in manifest["files"] if f["role"] == "tool-dependency")
    assert any(name.startswith("uv-") and "aarch64" in name for name in tool)
    assert not any("x86_64" in name for name in tool)
    print(
        f"\nbundle: {data['size'] / 1e6:.1f} MB in {data['files']} files; missing: "
        f"{', '.join(m['package'] for m in manifest['missing'])}\ntool dependency wheels for aarch64 "
        f"({len(tool)}):\n  " + "\n  ".join(tool)
    )
