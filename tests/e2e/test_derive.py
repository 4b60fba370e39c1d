"""`matrix derive` and `matrix check` against the simulated host's indexes (whose METADATA carries the
real Requires-Dist), and, with --live, against the real index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2e.conftest import ROW, installed, lock_versions
from ascend_setup.index.pipconfig import pip_settings
from ascend_setup.matrix import load_matrix
from ascend_setup.matrix.load import PACKAGED_MATRIX, parse_matrix


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
    tampered.write_text(packaged.replace('      triton-ascend: "3.2.2"', '      triton-ascend: "3.2.1"', 1)
                        .replace('      vllm-ascend: {aarch64: "2.34", x86_64: "2.34"}',
                                 '      vllm-ascend: {aarch64: "2.28", x86_64: "2.34"}', 1))
    proc = source_stack.cli("matrix", "check", str(tampered), "--live", *source_stack.index_args(), "--json")
    assert proc.returncode == 1, proc.stdout
    drift = json.loads(proc.stdout)["rows"]["9.1.0"]["drift"]
    assert any("triton-ascend is 3.2.1 in the matrix, 3.2.2 in the metadata" in d for d in drift), drift
    assert any("wheel_glibc vllm-ascend aarch64: 2.28 in the matrix, 2.34" in d for d in drift), drift
    inconsistent = tmp_path / "inconsistent.yaml"
    inconsistent.write_text(packaged.replace('plugin_requirements: ["fastapi<0.124.0"',
                                             'plugin_requirements: ["transformers<5", "fastapi<0.124.0"', 1))
    offline = source_stack.cli("matrix", "check", str(inconsistent))
    assert offline.returncode == 1 and "excludes the row's own pin transformers==5.5.4" in offline.stdout


@pytest.mark.live
def test_live_derive_equals_the_packaged_row_and_check_passes(cli) -> None:
    index = pip_settings().index
    proc = cli("matrix", "derive", "--vllm-ascend", "0.23.0", "--cann", "9.1.0", "--index-url", index, "--json",
               timeout=300)
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
