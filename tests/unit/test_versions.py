"""The one rule for "the same version": the local part counts, except when asking which release it is."""

from __future__ import annotations

from typing import Optional

import pytest
from packaging.version import Version

from ascend_setup.dists.versions import local_only_differs, pin_verdict, same_release, same_version


def test_the_local_part_counts() -> None:
    assert same_version("2.10.0", "2.10.0") and same_version(Version("2.10.0"), "2.10")
    assert not same_version("2.10.0", "2.10.0+cpu") and not same_version("2.10.0+cu128", "2.10.0+cpu")
    assert not same_version(None, "2.10.0") and not same_version("2.10.0", None)
    assert same_version("not-a-version", "not-a-version") and not same_version("not-a-version", "2.10.0")


def test_the_release_ignores_the_local_part() -> None:
    assert same_release("2.10.0+cu128", "2.10.0") and not same_release("2.10.1", "2.10.0")
    assert not same_release(None, "2.10.0") and not same_release("junk", "2.10.0")
    assert local_only_differs("2.10.0", "2.10.0+cpu") and not local_only_differs("2.10.0+cpu", "2.10.0+cpu")
    assert not local_only_differs("2.10.1", "2.10.0+cpu")


@pytest.mark.parametrize(
    "found, pin, accepted, words",
    [
        ("0.23.0", "0.23.0", True, ""),
        ("0.23.0.post1", "0.23.0", True, "a newer post release of the row's 0.23.0"),
        ("0.23.0+empty", "0.23.0", True, "a source build (+empty) of 0.23.0"),
        (
            "0.23.0.post1+empty",
            "0.23.0",
            True,
            "newer post release of the row's 0.23.0 (bug fixes of the same release) and a source build",
        ),
        ("2.10.0.post5", "2.10.0.post4", True, "newer post release"),
        ("2.10.0.post2", "2.10.0.post4", False, "an older post release"),
        ("0.23.1", "0.23.0", False, "where the row pins 0.23.0"),
        ("0.24.0rc1", "0.23.0", False, "where the row pins"),
        ("0.23.0rc1", "0.23.0", False, "where the row pins"),
        ("0.23.0.dev3", "0.23.0", False, "where the row pins"),
        ("2.10.0+cu128", "2.10.0", False, "where the row pins"),
        ("2.10.0", "2.10.0+cpu", False, "where the row pins"),
        ("2.10.0.post1+cpu", "2.10.0+cpu", True, "newer post release"),
        ("junk", "0.23.0", False, "where the row pins"),
        (None, "0.23.0", False, "is not installed"),
    ],
)
def test_the_pin_policy(found: Optional[str], pin: str, accepted: bool, words: str) -> None:
    verdict = pin_verdict("vllm", found, pin)
    assert verdict.accepted is accepted and words in verdict.note
    assert (found or "not installed") in verdict.said()


def test_matrix_names_a_post_release_of_a_rows_pin_that_rows_cann() -> None:
    """`matrix check --live` recommends 0.23.0.post1: it is the 0.23.0 row's, by the same policy."""
    from ascend_setup.matrix import load_matrix
    from ascend_setup.matrix.releases import cann_of

    matrix = load_matrix()
    cann, source = cann_of(matrix, "0.23.0.post1", [], reader=None)  # type: ignore[arg-type]  # not read
    assert cann == "9.1.0" and "a newer post release of the row's 0.23.0" in source
    assert cann_of(matrix, "0.23.0", [], reader=None)[1] == "row 9.1.0 of the matrix"  # type: ignore[arg-type]


def test_verify_accepts_the_pins_post_release_and_says_what_it_found() -> None:
    from ascend_setup.steps.verify import import_problems

    said: list = []
    result = {
        "vllm": {"ok": True, "version": "0.23.0+empty"},
        "vllm-ascend": {"ok": True, "version": "0.23.0.post1"},
        "torch": {"ok": True, "version": "2.9.0"},
        "torch-npu": {"ok": False, "error": "ImportError: x"},
    }
    pins = {"vllm": "0.23.0", "vllm-ascend": "0.23.0", "torch": "2.10.0", "torch-npu": "2.10.0.post4"}
    assert import_problems(result, pins, said) == [
        "torch 2.9.0 where the row pins 2.10.0",
        "import of torch-npu fails: ImportError: x",
    ]
    assert said[:2] == [
        "vllm 0.23.0+empty: a source build (+empty) of 0.23.0; accepted",
        "vllm-ascend 0.23.0.post1: a newer post release of the row's 0.23.0 (bug fixes of the same release); accepted",
    ]
