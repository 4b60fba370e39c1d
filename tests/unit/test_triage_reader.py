"""The reader's classes, each on the smallest log that needs it: prefixes, rebuilt tracebacks, error blocks,
attempts, evidence. A test here fails when its class breaks, whatever signature the log happens to hold."""

from __future__ import annotations

import io
from typing import List, Optional

from ascend_setup.knowledge.fixes import Host
from ascend_setup.knowledge.reader import normalise, strip_prefixes
from ascend_setup.knowledge.scan import Diagnosis, triage_stream

ENGINE = "(EngineCore_DP0 pid=14421) ERROR 11-27 08:19:08 [core.py:708] "
API = "(APIServer pid=14300) "


def _triage(lines: List[str], ending: str = "\n") -> Optional[Diagnosis]:
    return triage_stream(io.BytesIO("".join(l + ending for l in lines).encode()), host=Host())


def test_every_prefix_comes_off_and_its_level_and_process_stay() -> None:
    assert strip_prefixes(ENGINE + "  File \"x.py\", line 1") == (
        '  File "x.py", line 1',
        "EngineCore_DP0 pid=14421",
        "ERROR",
    )
    assert strip_prefixes("(VllmWorker rank=3 pid=112081) INFO 07-17 08:06:53 [gpu.py:1] ok")[1:] == (
        "VllmWorker rank=3 pid=112081",
        "INFO",
    )
    assert strip_prefixes("(RayWorkerWrapper pid=5, ip=10.0.0.2) x")[:2] == ("x", "RayWorkerWrapper pid=5, ip=10.0.0.2")
    assert strip_prefixes("[rank1]: KeyError: 'a'")[:2] == ("KeyError: 'a'", "rank1")
    assert strip_prefixes(
        "[ERROR] 2025-08-05-08:05:26 (PID:5, Device:0, RankID:-1) ERR00100 PTA call acl api failed"
    ) == ("ERR00100 PTA call acl api failed", "", "ERROR")
    line = "[ERROR] HCCL(27,python3):2025-07-23-03:47:57.070.463 [hccl_socket.cc:100] [27]x"
    assert strip_prefixes(line)[0] == "[27]x"
    assert strip_prefixes("WARNING:root:Failed to import")[::2] == ("Failed to import", "WARNING")
    assert strip_prefixes("  × No solution found")[::2] == ("No solution found", "×")
    [line] = normalise(7, "\x1b[1;31mERROR 11-27 08:19:08 [core.py:1] boom\x1b[0m\r\n")
    assert (line.number, line.text, line.level) == (7, "boom", "ERROR")
    pasted = normalise(3, r'"Traceback (most recent call last):\n  File \"a.py\", line 1\nValueError: x"')
    assert [l.number for l in pasted] == [3, 3, 3] and pasted[-1].text == 'ValueError: x"'


def test_under_prefixes_the_exception_line_is_the_cause_not_a_frame() -> None:
    lines = [
        ENGINE + "Traceback (most recent call last):",
        ENGINE + '  File "/v/site-packages/vllm/error_handler.py", line 3, in run',
        ENGINE + "    raise_error(errors)",
        ENGINE + "OSError: [Errno 5] Input/output error",
    ]
    diagnosis = _triage(lines)
    assert diagnosis is not None and diagnosis.line_number == 4 and diagnosis.id is None


def test_the_first_exception_of_a_chain_is_the_root_and_the_api_server_wrapper_loses() -> None:
    lines = [
        API + "Traceback (most recent call last):",
        API + '  File "/v/site-packages/vllm/v1/engine/core_client.py", line 1, in f',
        API + "    x()",
        API + "RuntimeError: Something in the API server went wrong",
        ENGINE + "Traceback (most recent call last):",
        ENGINE + '  File "/v/site-packages/vllm/worker.py", line 9, in load',
        ENGINE + "    load()",
        ENGINE + "KeyError: 'model.layers.0.weight'",
        ENGINE + "",
        ENGINE + "The above exception was the direct cause of the following exception:",
        ENGINE + "Traceback (most recent call last):",
        ENGINE + '  File "/v/site-packages/vllm/core.py", line 2, in run',
        ENGINE + "    run()",
        ENGINE + "RuntimeError: Model loading failed",
        API + "RuntimeError: Engine core initialization failed. See root cause above.",
    ]
    diagnosis = _triage(lines)
    assert diagnosis is not None and diagnosis.line_number == 8 and "KeyError" in diagnosis.line


def test_a_traceback_cut_off_before_its_exception_is_judged_on_its_last_source_line() -> None:
    lines = [
        "Traceback (most recent call last):",
        'File "/opt/te_fusion/fusion_util.py", line 2623, in set_dir',
        "os.makedirs(kernel_meta_dir, stat.S_IRWXU)",
        'File "<frozen os>", line 215, in makedirs',
    ]
    diagnosis = _triage(lines)
    assert diagnosis is not None and (diagnosis.id, diagnosis.line_number) == ("kernel-meta-permission", 3)


def test_the_specific_line_of_a_cann_block_wins_over_its_header_and_torch_npus_summary() -> None:
    lines = [
        "RuntimeError: call aclnnEqual failed, detail:EZ9999: Inner Error!",
        "[ERROR] 2025-08-05-08:05:26 (PID:5, Device:0, RankID:-1) ERR00100 PTA call acl api failed",
        "EZ9999: Inner Error!",
        "EZ9999  Kernel launch of MatMulV3 failed on stream 3.[FUNC:Launch][FILE:op.cc][LINE:10]",
        "        TraceBack (most recent call last):",
        "        launch failed for MatMulV3[FUNC:ReportInnerError]",
    ]
    diagnosis = _triage(lines)
    assert diagnosis is not None and diagnosis.id is None and diagnosis.line_number == 4


def test_cmakes_message_and_pips_inner_error_win_over_their_headers() -> None:
    cmake = _triage(["CMake Error at CMakeLists.txt:14 (project):", "  The source directory is odd.", "-- done"])
    assert cmake is not None and cmake.line_number == 2
    pip = _triage(
        [
            "  error: subprocess-exited-with-error",
            "  × python setup.py egg_info did not run successfully.",
            "  │ exit code: 1",
            "  ╰─> [3 lines of output]",
            "      Traceback (most recent call last):",
            '        File "<string>", line 2, in <module>',
            "      RuntimeError: no npu-smi here",
            "      [end of output]",
        ]
    )
    assert pip is not None and pip.line_number == 7


def test_the_last_attempt_counts_and_facts_carry_over() -> None:
    first = ["$ pip install vllm-ascend", "ERROR: No matching distribution found for triton-ascend==3.2.2", "[exit 1]"]
    prompt = ["Successfully installed numpy-2.0.2", "user@host:~/work$ python -c 'import torch_npu'"]
    error = ["RuntimeError: SetPrecisionMode: NPU function error: AclSetCompileopt, error code is 500001"]
    diagnosis = _triage(first + prompt + error)
    assert diagnosis is not None and (diagnosis.id, diagnosis.line_number) == ("numpy2-cann", 6)
    assert diagnosis.evidence == [(4, "Successfully installed numpy-2.0.2")]
    assert "evidence" in diagnosis.to_json() and diagnosis.to_json()["evidence"][0]["line_number"] == 4
    assert _triage(first + ["$ pip install vllm-ascend", "Successfully installed vllm-ascend-0.23.0"]) is None
    restart = [
        "INFO 12-01 09:12:03 [__init__.py:43] Available plugins for group vllm.platform_plugins:",
        "INFO 12-01 09:12:09 [api_server.py:1880] vLLM API server version 0.23.0",
    ]
    assert _triage(first[1:] + restart) is None  # vLLM started again after the failure


def test_without_the_fact_the_same_error_names_the_general_cause() -> None:
    diagnosis = _triage(["RuntimeError: SetPrecisionMode: error code is 500001"])
    assert diagnosis is not None and diagnosis.id == "cann-init-env" and diagnosis.evidence == []
    shadow = _triage(
        [
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3/site-packages/vllm/entrypoints/cli/main.py", line 7, in <module>',
            "    import vllm.v1.x",
            "ModuleNotFoundError: No module named 'vllm.v1.x'",
        ]
    )
    assert shadow is not None and shadow.id == "vllm-plugin-mismatch"


def test_a_code_no_signature_knows_names_the_cause_when_specific_and_its_meaning_when_generic() -> None:
    diagnosis = _triage(["RuntimeError: aclrtMalloc failed, error code is 207001"])
    assert diagnosis is not None and diagnosis.id == "code:acl:207001" and diagnosis.fix
    assert "ACL_ERROR_RT_MEMORY_ALLOCATION" in diagnosis.cause
    hccl = _triage(
        ["[ERROR] HCCL(1,python3):2025-07-23-03:47:57.070.466 [m.cc:54] [1][ServerInit]call trace: hcclRet -> 11"]
    )
    assert hccl is not None and hccl.id is None and "HCCL_E_TCP_CONNECT" in hccl.cause
