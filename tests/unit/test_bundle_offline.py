"""The offline bundle's checks, without a world: the manifest against a host, row and SOC; the bundle's pages
behind an index URL (the gate reads them, nothing else is asked); a tar's verify and its one unpacking."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from ascend_setup.bundle.manifest import (
    LOCK,
    MANIFEST,
    BundleTarget,
    Manifest,
    Missing,
    entry,
    verify_bundle,
    write_manifest,
)
from ascend_setup.bundle.offline import Bundle, bundle_pages, check_bundle, unpack
from ascend_setup.errors import BadInput
from ascend_setup.index.reach import IndexNeed, check_indexes
from ascend_setup.index.simple import IndexPool
from ascend_setup.matrix import load_matrix
from ascend_setup.resolve.lockfile import Lock, LockedPackage, LockTarget, write_lock

ROW = load_matrix().rows["9.1.0"].for_arch("x86_64")
DEAD = "http://127.0.0.1:9/simple/"  # refused at once: a page asked of the network fails fast


def _manifest(**target) -> Manifest:
    t = {"arch": "x86_64", "glibc": "2.31", "python": "3.11", "device": "A2", "soc": None, **target}
    return Manifest(
        tool_version="0",
        created="2026-12-01T00:00:00+00:00",
        cann="9.1.0",
        row=ROW.to_json(),
        target=BundleTarget(**t),
        files=[],
    )


def _check(manifest: Manifest, **host) -> None:
    h = {"cann": "9.1.0", "row": ROW, "arch": "x86_64", "glibc": "2.31", "soc": "ascend910b3", **host}
    check_bundle(manifest, Path("/b"), **h)


def test_a_bundle_for_this_host_row_and_soc_passes() -> None:
    _check(_manifest())
    _check(_manifest(soc="ascend910b3"))
    _check(_manifest(), soc=None)  # no NPU known here: the target alone decides


@pytest.mark.parametrize(
    "manifest, host, words",
    [
        (_manifest(arch="aarch64"), {}, "was made for aarch64 / glibc 2.31; this host is x86_64"),
        (_manifest(glibc="2.35"), {}, "glibc 2.35"),
        (_manifest(), {"cann": "9.0.1"}, "is for CANN 9.1.0, not --cann 9.0.1"),
        (_manifest(soc="ascend910b1"), {}, "made for SOC ascend910b1; this host's is ascend910b3"),
        (_manifest(device="A3"), {}, "made for A3 NPUs"),
        (_manifest(), {"row": load_matrix().rows["9.1.0"].for_arch("aarch64")}, "another row"),
    ],
)
def test_a_bundle_for_another_target_row_or_soc_is_bad_input(manifest, host, words) -> None:
    with pytest.raises(BadInput, match=words.replace("(", r"\(")):
        _check(manifest, **host)


def test_an_incomplete_bundle_is_refused_naming_what_it_lacks() -> None:
    manifest = _manifest()
    manifest.missing = [Missing(package="triton-ascend", version="3.2.2", reason="index 'ascend' unreachable")]
    with pytest.raises(BadInput, match="incomplete: triton-ascend"):
        _check(manifest)


def _bundle(root: Path) -> tuple:
    files = root / "files"
    files.mkdir(parents=True)
    wheel = files / "decorator-5.1.1-py3-none-any.whl"
    wheel.write_bytes(b"wheel bytes")
    from ascend_setup.index.download import sha256_of

    lock = Lock(
        cann="9.1.0",
        target=LockTarget(arch="x86_64", glibc="2.31", python="3.11"),
        indexes={"mirror": DEAD},
        inputs="x",
        packages=[
            LockedPackage(
                name="decorator",
                version="5.1.1",
                outcome="wheel",
                index="mirror",
                file=wheel.name,
                url=DEAD + "decorator/" + wheel.name,
                sha256=sha256_of(wheel),
                size=wheel.stat().st_size,
            )
        ],
    )
    write_lock(lock, root / LOCK)
    manifest = _manifest()
    manifest.files = [entry(root, root / LOCK, "lock"), entry(root, wheel, "package", "decorator", "5.1.1")]
    write_manifest(root, manifest)
    return lock, wheel


def test_the_gate_reads_the_bundle_behind_the_locks_index_url(tmp_path: Path) -> None:
    lock, _wheel = _bundle(tmp_path / "b")
    session_pages = bundle_pages(Bundle(tmp_path / "b"), lock)
    pool = IndexPool(session_pages)
    (check,) = check_indexes([IndexNeed("mirror", [DEAD], {"decorator": "5.1.1"})], indexes=pool)
    assert check.ok, check.message()
    (missing,) = check_indexes([IndexNeed("mirror", [DEAD], {"decorator": "9.9"})], indexes=IndexPool(session_pages))
    assert "has only 5.1.1" in missing.message()


def test_a_tar_is_verified_member_by_member_and_unpacked_once(tmp_path: Path) -> None:
    root = tmp_path / "b"
    _bundle(root)
    tar = tmp_path / "b.tar"
    with tarfile.open(tar, "w") as archive:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            archive.add(path, arcname=path.relative_to(root).as_posix())
    assert verify_bundle(tar)[1] == []
    dest = tmp_path / "work" / "bundle"
    assert unpack(tar, dest) == dest and (dest / MANIFEST).is_file()
    marker = dest / "files" / "decorator-5.1.1-py3-none-any.whl"
    marker.write_bytes(b"changed after the unpacking")
    unpack(tar, dest)  # the same manifest: reused as it is
    assert marker.read_bytes() == b"changed after the unpacking"
    assert "corrupt: files/decorator" in verify_bundle(dest)[1][0]
    bad = tmp_path / "bad.tar"
    data = tar.read_bytes()
    at = data.index(b"wheel bytes")
    bad.write_bytes(data[:at] + b"W" + data[at + 1 :])
    assert verify_bundle(bad)[1] == [
        "corrupt: files/decorator-5.1.1-py3-none-any.whl does not match its sha256 "
        f"{verify_bundle(tar)[0].files[1].sha256[:12]}..."
    ]
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "x").write_text("mine")
    with pytest.raises(BadInput, match="was not unpacked by ascend-setup"):
        unpack(tar, foreign)
    assert (foreign / "x").read_text() == "mine"


def test_transfer_progress_off_a_terminal_is_a_heartbeat_of_bytes_and_files() -> None:
    import io
    import time

    from rich.console import Console

    from ascend_setup.cli.progress import TransferProgress

    out = io.StringIO()
    with TransferProgress(Console(file=out, width=80), "bundle", 2, 3_000_000, heartbeat=0.05) as progress:
        progress.update("a", 1_000_000)
        progress.finished("b", 500_000)
        time.sleep(0.3)
    assert "… bundle: 1 of 2 files, 1.5 MB of 3.0 MB" in out.getvalue()
