"""The compatibility matrix: rows load, malformed files name the line, rows cannot be mixed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import REPO, assert_one_line_error
from packaging.version import Version
from pydantic import ValidationError

from ascend_setup.errors import BadInput
from ascend_setup.matrix import load_matrix, parse_matrix, select_row
from ascend_setup.matrix.load import PACKAGED_MATRIX

GOOD = PACKAGED_MATRIX.read_text()


def test_every_row_loads_with_field_notes_values() -> None:
    matrix = load_matrix()
    assert matrix.versions() == ["9.1.0", "9.0.1", "9.0.0"]
    row = select_row(matrix, "9.1.0")
    assert row.pin("torch-npu") == Version("2.10.0.post4")
    assert row.packages["vllm-ascend"] == "0.23.0" and row.packages["triton-ascend"] == "3.2.2"
    assert row.index_of("triton-ascend") == "ascend" and row.index_of("torch") == "mirror"
    assert select_row(matrix, "9.0.1").packages["torch-npu"] == "2.10.0.post2"
    assert select_row(matrix, "9.0.0").packages["vllm-ascend"] == "0.22.1rc1"
    assert row.cann_python_deps["decorator"] == "4.4.0"
    assert row.python_allows("3.11.4") and not row.python_allows("3.13.0")


def test_top_level_matrix_is_the_packaged_one() -> None:
    assert (REPO / "compat_matrix.yaml").read_text() == GOOD


def test_cuda_only_patterns_match_normalized_names() -> None:
    row = select_row(load_matrix(), "9.1.0")
    for name in [
        "flashinfer_python",
        "flashinfer-cubin",
        "nvidia-cudnn-frontend",
        "tilelang",
        "torch",
        "Apache_TVM_FFI",
        "nvidia-cutlass-dsl",
    ]:
        assert row.is_cuda_only(name), name
    for name in ["openai", "transformers", "xgrammar", "numba", "torch-npu"]:
        assert not row.is_cuda_only(name), name


def test_rows_cannot_be_mixed() -> None:
    matrix = load_matrix()
    row = select_row(matrix, "9.1.0")
    with pytest.raises(TypeError):
        row.packages["torch-npu"] = "2.10.0.post2"  # type: ignore[index]
    with pytest.raises(ValidationError):
        row.cann = "9.0.1"  # frozen model
    other = select_row(matrix, "9.0.1")
    assert row.packages["torch-npu"] != other.packages["torch-npu"]


def test_unknown_version_lists_known_ones() -> None:
    with pytest.raises(BadInput) as err:
        select_row(load_matrix(), "8.0.0")
    assert "9.1.0, 9.0.1, 9.0.0" in err.value.message


@pytest.mark.parametrize(
    "mutate, line, words",
    [
        (
            lambda t: t.replace('torch-npu: "2.10.0.post4"', 'torch-npu: "2.10.x"'),
            "torch-npu: \"2.10.x\"",
            "not a valid version",
        ),
        (lambda t: t.replace('      transformers: "5.5.4"\n', "", 1), '    packages:', "missing pins for transformers"),
        (lambda t: t.replace('    python: ">=3.10,<3.13"\n', "", 1), '  "9.1.0":', "python: required field is missing"),
        (
            lambda t: t.replace("    disk_gib: 40\n", "    disk_gib: 40\n    surprise: 1\n", 1),
            "surprise: 1",
            "unknown field",
        ),
        (
            lambda t: t.replace("      triton-ascend: ascend", "      triton-ascend: nowhere", 1),
            None,
            "unknown index 'nowhere'",
        ),
    ],
)
def test_malformed_matrix_names_the_line(mutate, line, words) -> None:
    text = mutate(GOOD)
    assert text != GOOD
    with pytest.raises(BadInput) as err:
        parse_matrix(text, "broken.yaml")
    message = err.value.message
    assert message.startswith("broken.yaml:") and words in message, message
    if line is not None:
        row_start = next(i for i, l in enumerate(text.splitlines(), 1) if l.startswith('  "9.1.0":'))
        expected = next(i for i, l in enumerate(text.splitlines(), 1) if line in l and i >= row_start)
        assert message.startswith(f"broken.yaml:{expected}:"), (message, expected)


def test_bad_yaml_names_the_line() -> None:
    text = GOOD.replace('    python: ">=3.10,<3.13"', '    python: [">=3.10"', 1)
    with pytest.raises(BadInput) as err:
        parse_matrix(text, "bad.yaml")
    assert "not valid YAML" in err.value.message and err.value.message.startswith("bad.yaml:")


def test_cli_validate_broken_file(cli, tmp_path: Path) -> None:
    broken = tmp_path / "m.yaml"
    broken.write_text(GOOD.replace('vllm-ascend: "0.23.0"', 'vllm-ascend: "zero"', 1))
    line = assert_one_line_error(cli("matrix", "validate", str(broken)))
    expected = next(i for i, l in enumerate(broken.read_text().splitlines(), 1) if '"zero"' in l)
    assert f"{broken}:{expected}:" in line and "not a valid version" in line
    ok = cli("matrix", "validate", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["valid"] is True


def test_cli_show_json_and_matrix_override(cli, tmp_path: Path) -> None:
    proc = cli("matrix", "show", "9.1.0", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["cann"] == "9.1.0" and data["python"] == ">=3.10,<3.13"
    assert data["packages"]["vllm-ascend"] == "0.23.0" and data["packages"]["torch"] == "2.10.0"
    custom = tmp_path / "custom.yaml"
    custom.write_text(GOOD.replace('"9.0.0":', '"8.5.0":'))
    listed = cli("matrix", "list", "--json", env={"ASCEND_SETUP_MATRIX": str(custom)})
    assert [r["cann"] for r in json.loads(listed.stdout)["rows"]] == ["9.1.0", "9.0.1", "8.5.0"]
    flag = cli("matrix", "show", "8.5.0", "--json", "--matrix", str(custom))
    assert flag.returncode == 0 and json.loads(flag.stdout)["cann"] == "8.5.0"


def test_cli_unknown_cann_everywhere(cli) -> None:
    for args in (["matrix", "show", "8.0.0"], ["install", "--cann", "8.0.0", "--dry-run"]):
        line = assert_one_line_error(cli(*args))
        assert "9.1.0, 9.0.1, 9.0.0" in line


def test_missing_matrix_file(cli, tmp_path: Path) -> None:
    line = assert_one_line_error(cli("matrix", "list", "--matrix", str(tmp_path / "nope.yaml")))
    assert "does not exist" in line


@pytest.mark.parametrize(
    "mutate, words",
    [
        (lambda t: t.replace("  x86_64:\n    packages:", "  sparc:\n    packages:", 1), "unknown architecture 'sparc'"),
        (
            lambda t: t.replace("torch: pytorch-cpu, torchvision", "torch: nowhere, torchvision", 1),
            "unknown index 'nowhere'",
        ),
        (lambda t: t.replace('{torch: "2.10.0+cpu"', '{tensorflow: "2.10.0"', 1), "tensorflow (x86_64)"),
        (lambda t: t.replace('torchaudio: "2.10.0+cpu"}', 'torchaudio: "2.10.x"}', 1), "not a valid version"),
    ],
)
def test_per_architecture_variants_are_validated(mutate, words) -> None:
    text = mutate(GOOD)
    assert text != GOOD
    with pytest.raises(BadInput) as err:
        parse_matrix(text, "broken.yaml")
    assert words in err.value.message and err.value.message.startswith("broken.yaml:"), err.value.message


def test_a_row_as_each_architecture_takes_it() -> None:
    row = parse_matrix(GOOD, "good.yaml").rows["9.1.0"]
    x86, arm = row.for_arch("x86_64"), row.for_arch("aarch64")
    assert (x86.packages["torch"], x86.index_of("torch")) == ("2.10.0+cpu", "pytorch-cpu")
    assert (arm.packages["torch"], arm.index_of("torch")) == ("2.10.0", "mirror")
    assert x86.packages["torch-npu"] == arm.packages["torch-npu"] == "2.10.0.post4"
    assert x86.named_indexes() == ["pytorch-cpu", "ascend"] or set(x86.named_indexes()) == {"pytorch-cpu", "ascend"}
    assert arm.named_indexes() == ["ascend"]


def test_additional_config_flags_become_one_json_object() -> None:
    from ascend_setup.matrix.serve_hints import merged_serve_args

    merged = merged_serve_args(
        [
            "--additional-config",
            '{"ascend_fusion_config": {"fuse_qknorm_rope": false}}',
            "--default-chat-template-kwargs",
            '{"enable_thinking": false}',
            '--additional-config={"enable_flashcomm1": false, "ascend_fusion_config": {"x": 1}}',
        ]
    )
    assert merged[0] == "--additional-config" and merged.count("--additional-config") == 1
    assert json.loads(merged[1]) == {
        "ascend_fusion_config": {"fuse_qknorm_rope": False, "x": 1},
        "enable_flashcomm1": False,
    }
    assert merged[2:] == ["--default-chat-template-kwargs", '{"enable_thinking": false}']  # the rest, in order
    assert merged_serve_args(["--port", "8000"]) == ["--port", "8000"]


def test_hints_follow_the_rows_plugin_version() -> None:
    from ascend_setup.matrix.serve_hints import hint_lines

    matrix = load_matrix()
    flashcomm = [h for h in matrix.rows["9.1.0"].hints() if h.id == "vision-flashcomm"]
    assert len(flashcomm) == 1 and not flashcomm[0].env  # 0.23.0: the config key, not the deprecated variable
    assert json.loads(flashcomm[0].serve_args[1]) == {"enable_flashcomm1": False}
    old = matrix.rows["9.1.0"].model_copy(
        update={"packages": {**matrix.rows["9.1.0"].packages, "vllm-ascend": "0.19.1rc1"}}
    )
    (env_hint,) = [h for h in old.hints() if h.id == "vision-flashcomm"]
    assert dict(env_hint.env) == {"VLLM_ASCEND_ENABLE_FLASHCOMM1": "0"}  # before the key existed: the variable
    lines = hint_lines(matrix.rows["9.1.0"])
    last = lines[-1]  # two hints set --additional-config: vLLM keeps the last flag, so they are said as one
    assert last.count("--additional-config") == 2 and '"enable_flashcomm1": false' in last
    assert '"fuse_qknorm_rope": false' in last.split("--additional-config")[-1]


def test_a_hint_the_plugin_source_no_longer_reads_is_flagged(tmp_path: Path) -> None:
    import io
    import tarfile

    from ascend_setup.matrix.models import RuntimeHint
    from ascend_setup.matrix.serve_hints import unread_variables

    sdist = tmp_path / "vllm_ascend-0.23.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for name, text in (
            ("vllm_ascend-0.23.0/vllm_ascend/envs.py", 'os.getenv("VLLM_ASCEND_KEPT")\n'),
            ("vllm_ascend-0.23.0/tests/test_env.py", 'os.getenv("VLLM_ASCEND_GONE")\n'),
        ):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    hints = [
        RuntimeHint(id="kept", text="t", env={"VLLM_ASCEND_KEPT": "0"}),
        RuntimeHint(id="gone", text="t", env={"VLLM_ASCEND_GONE": "0"}),
    ]  # only a test reads it
    assert unread_variables(hints, sdist) == [f"hint gone: {sdist.name}'s source no longer reads VLLM_ASCEND_GONE"]


def test_a_bad_hint_plugin_range_names_the_line() -> None:
    broken = GOOD.replace('plugin: ">=0.20.2rc1"', 'plugin: "from 0.23 on"', 1)
    with pytest.raises(BadInput) as info:
        parse_matrix(broken, "m.yaml")
    assert "is not a version range" in info.value.message and "m.yaml:" in info.value.message


def test_python_range_of_an_sdist_only_plugin_is_closed_by_its_binary_pins() -> None:
    from ascend_setup.matrix.derive import python_range

    bounds = {"torch-npu": (14, "torch-npu's newest wheel is cp313"), "triton-ascend": (12, "cp311")}
    assert python_range(">=3.10", [], bounds)[0] == ">=3.10,<3.12"  # the tightest binary pin
    assert "no wheels" in python_range(">=3.10", [], bounds)[1]
    assert python_range(">=3.10", [], {})[0] == ">=3.10"  # nothing closes it: said so, not guessed


def test_check_sdist_bad_input(cli, tmp_path: Path) -> None:
    odd = tmp_path / "notes.txt"
    odd.write_text("x")
    assert "not an sdist file name" in assert_one_line_error(cli("matrix", "check", "--sdist", str(odd)))
    unpinned = tmp_path / "vllm_ascend-0.9.0.tar.gz"
    unpinned.write_bytes(b"")
    assert "no row of" in assert_one_line_error(cli("matrix", "check", "--sdist", str(unpinned)))
