"""serve's and bench's failures are triaged by one reader (serve/run.triaged_failure): this attempt's part of the
log (from its offset), its line numbers counted from the top of the file, the log read through the input gate."""

from __future__ import annotations

from pathlib import Path

from ascend_setup.serve.run import triaged_failure

EARLIER = "".join(f"INFO earlier start, line {i}\n" for i in range(1, 6))
OOM = (
    "(EngineCore_DP0 pid=4121) ERROR 12-01 09:00:01 [core.py:708] RuntimeError: NPU out of memory. "
    "Tried to allocate 2.00 GiB (NPU 0; 60.97 GiB total capacity)\n"
)


def test_the_cause_is_read_from_the_offset_and_numbered_from_the_top(tmp_path: Path) -> None:
    log = tmp_path / "dense.log"
    log.write_text(EARLIER + "INFO a\nINFO b\n" + OOM + "INFO c\n")
    failure = triaged_failure("a request failed", log, len(EARLIER), prefix="serve dense: ")
    assert failure.message.startswith("serve dense: a request failed: the NPU ran out of memory")
    assert (failure.details or "").startswith("root cause (log line 8):")
    bench = triaged_failure("a request failed", log, len(EARLIER), source="; server dense's log")
    assert bench.message.startswith("a request failed; server dense's log: the NPU ran out of memory")


def test_an_earlier_starts_cause_is_not_this_ones(tmp_path: Path) -> None:
    log = tmp_path / "dense.log"
    log.write_text(OOM + "INFO the next start\nINFO loading\n")
    failure = triaged_failure("not ready", log, len(OOM), prefix="serve dense: ")
    assert "out of memory" not in failure.message
    assert failure.message == "serve dense: not ready; its last line: INFO loading"


def test_a_linked_or_missing_log_is_not_read(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere.log"
    real.write_text(OOM)
    (tmp_path / "dense.log").symlink_to(real)
    for log in (tmp_path / "dense.log", tmp_path / "missing.log"):
        failure = triaged_failure("exited", log, 0, prefix="serve dense: ")
        assert failure.message == "serve dense: exited" and failure.hint == f"read the log: {log}"
