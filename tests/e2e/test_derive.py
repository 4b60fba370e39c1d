"""`matrix derive` and `matrix check` against the simulated host's indexes (whose METADATA carries the
real Requires-Dist), and, with --live, against the real index."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.stack import ROW, installed, lock_versions

from ascend_setup.index.pipconfig import pip_settings
from ascend_setup.matrix import load_matrix
from ascend_setup.matrix.load import PACKAGED_MATRIX, parse_matrix
from ascend_setup.simulate.ecosystem import build_newer_plugin_releases
from ascend_setup.simulate.index_server import LocalIndex

#: What the OS's userland (glibc, the Python build, venv, the trust store, the toolchain, the disk) can
#: change: the glibc 2.31 root runs this file too.
pytestmark = pytest.mark.userland


def _derive(stack, *extra: str):
    return stack.cli("matrix", "derive", "--vllm-ascend", "0.23.0", "--cann", "9.1.0", *stack.index_args(), *extra)


def test_derive_reads_the_row_from_metadata_and_it_installs(source_stack, tmp_path: Path) -> None:
    proc = _derive(source_stack, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert not data["problems"]
    row = data["row"]
    assert row["packages"] == dict(ROW.packages)  # the packaged row, read back from the metadata
    assert row["package_index"] == {"triton-ascend": "ascend"}  # only the Ascend index serves 3.2.2
    assert row["arch"]["x86_64"]["packages"]["torch"] == "2.10.0+cpu"  # from torch-npu's x86_64 wheel
    assert row["arch"]["x86_64"]["package_index"]["torch"] == "pytorch-cpu"
    assert row["wheel_glibc"] == {"vllm-ascend": {"aarch64": "2.34"}}  # the stack's only plugin wheels
    assert "fastapi<0.124.0" in row["plugin_requirements"]
    assert "Requires-Dist" in data["provenance"]["packages.torch-npu"] and "--cann" in data["provenance"]["cann"]

    matrix_file = tmp_path / "matrix.yaml"
    matrix_file.write_text(PACKAGED_MATRIX.read_text().replace('  "9.1.0":', '  "9.1.1":'))  # a matrix without 9.1.0
    written = _derive(source_stack, "--into", str(matrix_file))
    assert written.returncode == 0, written.stderr
    text = matrix_file.read_text()
    assert "# The vLLM-Ascend compatibility matrix" in text and "&cuda_only" in text  # comments and anchors stay
    assert "# derived by 'ascend-setup matrix derive' for CANN 9.1.0" in text
    assert source_stack.cli("matrix", "validate", str(matrix_file)).returncode == 0
    again = _derive(source_stack, "--into", str(matrix_file))  # replacing its own row is idempotent
    assert again.returncode == 0 and matrix_file.read_text() == text
    assert set(parse_matrix(text, "m").rows) == {"9.1.1", "9.1.0", "9.0.1", "9.0.0"}

    workdir = tmp_path / "wd"
    install = source_stack.install(workdir, "--matrix", str(matrix_file))
    assert install.returncode == 0, install.stderr[-3000:]
    assert installed(workdir / "venv") == lock_versions(workdir)


def test_check_catches_a_tampered_pin_and_a_wrong_glibc(source_stack, tmp_path: Path) -> None:
    packaged = PACKAGED_MATRIX.read_text()
    assert source_stack.cli("matrix", "check", str(PACKAGED_MATRIX)).returncode == 0
    tampered = tmp_path / "tampered.yaml"
    tampered.write_text(
        packaged.replace('      triton-ascend: "3.2.2"', '      triton-ascend: "3.2.1"', 1).replace(
            '      vllm-ascend: {aarch64: "2.34", x86_64: "2.34"}',
            '      vllm-ascend: {aarch64: "2.28", x86_64: "2.34"}',
            1,
        )
    )
    proc = source_stack.cli("matrix", "check", str(tampered), "--live", *source_stack.index_args(), "--json")
    assert proc.returncode == 1, proc.stdout
    drift = json.loads(proc.stdout)["rows"]["9.1.0"]["drift"]
    assert any("triton-ascend is 3.2.1 in the matrix, 3.2.2 in the metadata" in d for d in drift), drift
    assert any("wheel_glibc vllm-ascend aarch64: 2.28 in the matrix, 2.34" in d for d in drift), drift
    inconsistent = tmp_path / "inconsistent.yaml"
    inconsistent.write_text(
        packaged.replace(
            'plugin_requirements: ["fastapi<0.124.0"', 'plugin_requirements: ["transformers<5", "fastapi<0.124.0"', 1
        )
    )
    offline = source_stack.cli("matrix", "check", str(inconsistent))
    assert offline.returncode == 1 and "excludes the row's own pin transformers==5.5.4" in offline.stdout


def _dead_index() -> str:
    """The URL of an index that is down (its server stopped: connections are refused)."""
    index = LocalIndex()
    url = index.url
    index.close()
    return url


def _ascend_down(stack) -> list:
    return [
        "--index-url",
        stack.main.url,
        "--index",
        f"ascend={_dead_index()}",
        "--index",
        f"pytorch-cpu={stack.pytorch_cpu.url}",
    ]


def test_a_tampered_pin_is_drift_while_the_ascend_index_is_down(source_stack, tmp_path: Path) -> None:
    tampered = tmp_path / "tampered.yaml"
    tampered.write_text(
        PACKAGED_MATRIX.read_text().replace('      triton-ascend: "3.2.2"', '      triton-ascend: "3.2.1"', 1)
    )
    proc = source_stack.cli("matrix", "check", str(tampered), "--live", *_ascend_down(source_stack), "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    entry = json.loads(proc.stdout)["rows"]["9.1.0"]
    # the plugin's metadata names the version, whichever index holds the file
    assert any("triton-ascend is 3.2.1 in the matrix, 3.2.2 in the metadata" in d for d in entry["drift"]), entry
    # what did need the Ascend index is kept apart: that the file exists there
    assert any(u.startswith("triton-ascend 3.2.") and "could not be reached" in u for u in entry["unverified"]), entry
    assert not any("comes from" in d for d in entry["drift"])  # where it comes from is not known: not drift
    untouched = source_stack.cli(
        "matrix", "check", str(PACKAGED_MATRIX), "--live", *_ascend_down(source_stack), "--json"
    )
    row = json.loads(untouched.stdout)["rows"]["9.1.0"]  # (the stub index has only this row's plugin release)
    assert not row["drift"] and row["unverified"], row


def test_check_lists_newer_releases_on_the_rows_cann(source_stack, tmp_path: Path) -> None:
    for path in build_newer_plugin_releases(tmp_path / "newer"):
        source_stack.main.add(path)
    args = ("matrix", "check", str(PACKAGED_MATRIX), "--live", *source_stack.index_args(), "--json")
    proc = source_stack.cli(*args)
    rows = json.loads(proc.stdout)["rows"]
    assert not rows["9.1.0"]["drift"], rows["9.1.0"]  # a newer release is information, not drift
    (post,) = rows["9.1.0"]["newer"]
    assert post["version"] == "0.23.0.post1" and not post["prerelease"]
    # a post release of the row's pin is that release (the version policy): its CANN is the row's
    assert post["files"].startswith("sdist only") and post["cann"] == "9.1.0"
    assert post["cann_source"].startswith("row 9.1.0 of the matrix") and "newer post release" in post["cann_source"]
    assert "memfabric-hybrid is not pinned in the matrix, 1.2.0 in the metadata" in post["differs"], post
    assert not rows["9.0.1"]["newer"] and not rows["9.0.0"]["newer"]  # 0.23.0.post1 is for 9.1.0, not for them
    pre = json.loads(source_stack.cli(*args, "--pre").stdout)["rows"]["9.1.0"]["newer"]
    assert [r["version"] for r in pre] == ["0.23.0.post1", "0.26.0rc1"]  # 0.30.0rc2 is for 9.2.0 (plugin_cann)
    assert pre[1]["prerelease"] and pre[1]["files"].startswith("wheels (aarch64 glibc >= 2.34")
    assert "transformers is 5.5.4 in the matrix, 5.14.1 in the metadata" in pre[1]["differs"], pre[1]
    one_row = tmp_path / "one-row.yaml"  # the stub index has only the 9.1.0 row's plugin release
    one_row.write_text(PACKAGED_MATRIX.read_text().split('  "9.0.1":')[0])
    only = ("matrix", "check", str(one_row), "--live", *source_stack.index_args())
    assert source_stack.cli(*only).returncode == 0  # a newer release is information
    assert source_stack.cli(*only, "--strict").returncode == 1  # unless --strict
    text = source_stack.cli(*args[:-1])
    assert "+ newer on CANN 9.1.0: vllm-ascend 0.23.0.post1, sdist only" in text.stdout, text.stdout
    # a CANN without a row: the message names the releases the index has for it, pre-releases marked
    unknown = source_stack.cli(
        "plan", "--cann", "9.2.0", "--arch", "aarch64", "--glibc", "2.35", *source_stack.index_args()
    )
    assert unknown.returncode == 2 and "vllm-ascend 0.30.0rc2 (pre-release) for CANN 9.2.0" in unknown.stderr, (
        unknown.stderr
    )
    assert len([l for l in unknown.stderr.splitlines() if l.strip()]) == 1


def test_a_cann_without_a_row_installs_from_the_derived_row(source_stack, tmp_path: Path) -> None:
    packaged = PACKAGED_MATRIX.read_text()
    without = tmp_path / "matrix.yaml"  # no row pins vllm-ascend 0.23.0
    without.write_text(packaged[: packaged.index('  "9.1.0":')] + packaged[packaged.index('  "9.0.1":') :])
    workdir = tmp_path / "wd"
    # a CANN no matrix knows (the fake CANN tree is 9.1.0: --force), so only the recorded row can name it
    install = source_stack.install(
        workdir, "--matrix", str(without), "--cann", "9.1.5", "--vllm-ascend", "0.23.0", "--force"
    )
    assert install.returncode == 0, install.stderr[-3000:]
    (line,) = [l for l in install.stderr.splitlines() if l.startswith("CANN 9.1.5 has no row")]
    assert "derived from vllm-ascend 0.23.0's own metadata" in line and "Requires-Dist" in line
    recorded = workdir / "matrix.yaml"
    assert set(parse_matrix(recorded.read_text(), "m").rows) == {"9.1.5", "9.0.1", "9.0.0"}
    assert "# derived by 'ascend-setup matrix derive' for CANN 9.1.5" in recorded.read_text()
    assert installed(workdir / "venv") == lock_versions(workdir)
    # resume and audit take the recorded row, with no network at all
    offline = ["unshare", "-n", sys.executable, "-m", "ascend_setup"]
    resume = subprocess.run(
        [*offline, "resume", "--workdir", str(workdir)],
        capture_output=True,
        text=True,
        env=source_stack.env(),
        timeout=600,
    )
    assert resume.returncode == 0 and "has no row" not in resume.stderr, resume.stderr[-3000:]
    audit = subprocess.run(
        [*offline, "audit", "--venv", str(workdir / "venv"), "--json"],
        capture_output=True,
        text=True,
        env=source_stack.env(),
        timeout=600,
    )
    assert audit.returncode == 0 and json.loads(audit.stdout)["row"] == "9.1.5", (
        audit.stdout[-2000:] + audit.stderr[-2000:]
    )


@pytest.mark.live
def test_live_derive_equals_the_packaged_row_and_check_passes(cli) -> None:
    index = pip_settings().index
    proc = cli(
        "matrix", "derive", "--vllm-ascend", "0.23.0", "--cann", "9.1.0", "--index-url", index, "--json", timeout=300
    )
    data = json.loads(proc.stdout)
    packaged = load_matrix().rows["9.1.0"]
    assert data["row"]["packages"] == dict(packaged.packages)
    assert data["row"]["arch"]["x86_64"]["packages"] == dict(packaged.arch["x86_64"].packages)
    assert data["row"]["python"] == packaged.python
    check = cli("matrix", "check", "--live", "--index-url", index, "--json", timeout=600)
    report = json.loads(check.stdout)
    assert check.returncode == 0 and report["ok"], report
    for entry in report["rows"].values():  # where the Ascend index cannot be reached: unverified, not drift
        assert all("could not be reached" in u or "no index serves" in u for u in entry["unverified"])


@pytest.mark.live
def test_live_check_lists_the_post_release_for_9_1_0(cli) -> None:
    check = cli("matrix", "check", "--live", "--index-url", pip_settings().index, "--json", timeout=600)
    report = json.loads(check.stdout)
    newer = {r["version"]: r for r in report["rows"]["9.1.0"]["newer"]}
    assert "0.23.0.post1" in newer, report["rows"]["9.1.0"]
    assert newer["0.23.0.post1"]["files"].startswith("sdist only")
    assert any("memfabric-hybrid" in d and "1.2.0" in d for d in newer["0.23.0.post1"]["differs"])
    assert check.returncode == 0 and report["ok"]  # newer releases are information


@pytest.mark.live
def test_live_derive_closes_the_python_range_of_the_sdist_only_post_release(cli) -> None:
    proc = cli(
        "matrix",
        "derive",
        "--vllm-ascend",
        "0.23.0.post1",
        "--cann",
        "9.1.0",
        "--index-url",
        pip_settings().index,
        "--json",
        timeout=300,
    )
    data = json.loads(proc.stdout)
    assert data["row"]["python"] == ">=3.10,<3.13", data["provenance"]["python"]  # 3.13 stays out
    assert "no wheels" in data["provenance"]["python"]


@pytest.mark.live
def test_live_plan_for_a_cann_without_a_row(cli) -> None:
    proc = cli(
        "plan",
        "--cann",
        "9.2.0",
        "--vllm-ascend",
        "0.30.0rc2",
        "--glibc",
        "2.35",
        "--arch",
        "aarch64",
        "--python",
        "3.11",
        "--index-url",
        pip_settings().index,
        timeout=900,
    )
    (line,) = [l for l in proc.stderr.splitlines() if l.startswith("CANN 9.2.0 has no row")]
    assert "derived from vllm-ascend 0.30.0rc2's own metadata" in line
    summary = re.search(
        r"CANN 9.2.0 on glibc 2.35 / aarch64 / Python 3.11 / A2 NPUs: (\d+) packages", proc.stdout
    )  # plan --soc defaults to A2
    assert summary and int(summary.group(1)) > 150, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "vllm-ascend==0.30.0rc2" in proc.stdout
    if proc.returncode:  # only the unreachable Ascend index may leave a package without a file
        assert "1 unavailable" in proc.stdout and "triton-ascend" in proc.stdout
