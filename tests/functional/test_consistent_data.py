"""Consistent data, or a refusal: a builds file that pins one build twice (the same minor and architecture, or
the same archive), a bundle tar that holds one member twice, a safetensors header whose tensors overlap or
whose offsets run past the end of the data. Each through the CLI, generated over its cases: exit 2 with one
line naming what disagrees (both pins, both tensors, the member), nothing written."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest
from helpers.cli import assert_one_line_error
from helpers.handmade_bundle import ARCHIVE, SOC, add_file, builds_doc, make_bundle, tar_of

CONFIG = {
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 1000,
    "torch_dtype": "bfloat16",
}
Setup = Callable[[Path], Tuple[List[str], List[str]]]  # case dir -> (argv, words the one line must hold)


def _install(case: Path, *extra: str) -> List[str]:
    return ["install", "--cann", "9.1.0", "--workdir", str(case / "wd"), "--soc", SOC, "--yes", *extra]


def _twice(change: Dict[str, Any]) -> Callable[[Dict[str, Any]], None]:
    """The builds file's first build pinned again, with `change` (another patch, or another minor)."""
    return lambda doc: doc["builds"].append({**doc["builds"][0], **change})


def _builds_flag(change: Dict[str, Any], words: List[str]) -> Setup:
    def setup(case: Path) -> Tuple[List[str], List[str]]:
        doc = builds_doc(b"archive")
        _twice(change)(doc)
        (case / "builds.json").write_text(json.dumps(doc))
        return _install(case, "--python-builds", str(case / "builds.json")), words

    return setup


def _builds_in_bundle(change: Dict[str, Any], words: List[str]) -> Setup:
    def setup(case: Path) -> Tuple[List[str], List[str]]:
        return _install(case, "--bundle", str(make_bundle(case / "bundle", builds=_twice(change)))), words

    return setup


def _member_twice(case: Path) -> Tuple[List[str], List[str]]:
    """A second lock.txt after the first: the one unpacked would not be the one checked."""
    root = make_bundle(case / "bundle")
    tar = tar_of(root, case / "bundle.tar", extra=lambda archive: add_file(archive, "lock.txt", b"another lock\n"))
    return _install(case, "--bundle", str(tar)), ["member 'lock.txt' appears twice"]


def _shard(tensors: Dict[str, Any], data_bytes: int) -> Setup:
    def setup(case: Path) -> Tuple[List[str], List[str]]:
        model = case / "model"
        model.mkdir()
        (model / "config.json").write_text(json.dumps(CONFIG))
        blob = json.dumps(tensors).encode()
        (model / "model.safetensors").write_bytes(struct.pack("<Q", len(blob)) + blob + b"\0" * data_bytes)
        return ["fit", str(model), "--workdir", str(case / "wd")], []

    return setup


def _tensor(start: int, end: int) -> Dict[str, Any]:
    return {"dtype": "BF16", "shape": [(end - start) // 2], "data_offsets": [start, end]}


CASES: Dict[str, Tuple[Setup, List[str]]] = {
    "builds:same-minor-and-arch": (
        _builds_flag({"version": "3.11.15", "file": "other.tar.gz"}, []),
        ["builds.0 and builds.1 both pin CPython 3.11 for x86_64"],
    ),
    "builds:same-archive": (
        _builds_flag({"version": "3.12.14"}, []),
        ["builds.0 and builds.1 both name the archive", ARCHIVE],
    ),
    "bundle-builds:same-minor-and-arch": (
        _builds_in_bundle({"version": "3.11.15", "file": "other.tar.gz"}, []),
        ["builds.0 and builds.1 both pin CPython 3.11 for x86_64"],
    ),
    "tar:member-twice": (_member_twice, []),
    "safetensors:overlap": (
        _shard({"a.weight": _tensor(0, 64), "b.weight": _tensor(32, 96)}, 96),
        ["tensors 'a.weight' and 'b.weight' overlap", "bytes 32-64"],
    ),
    "safetensors:same-bytes": (
        _shard({"a.weight": _tensor(0, 64), "b.weight": _tensor(0, 64)}, 64),
        ["'a.weight' and 'b.weight' overlap"],
    ),
    "safetensors:inside-another": (
        _shard({"big": _tensor(0, 128), "small": _tensor(32, 64), "__metadata__": {"format": "pt"}}, 128),
        ["'big' and 'small' overlap"],
    ),
    "safetensors:past-the-end": (
        _shard({"a.weight": _tensor(0, 64), "b.weight": _tensor(64, 256)}, 128),
        ["tensor 'b.weight'", "offsets 64-256 do not lie in the file's 128 data bytes"],
    ),
}


def _files(root: Path) -> Dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", CASES)
def test_inconsistent_data_is_refused_naming_what_disagrees(cli, tmp_path: Path, case: str) -> None:
    world = tmp_path / "world"
    world.mkdir()
    setup, words = CASES[case]
    argv, more = setup(world)
    before = _files(world)
    line = assert_one_line_error(cli(*argv, timeout=120), 2)
    for w in words + more:
        assert w in line, line
    assert _files(world) == before
    assert not (world / "wd").exists() or case.startswith("safetensors")


def test_a_consistent_shard_is_believed(cli, tmp_path: Path) -> None:
    """The baseline: tensors that touch (one's end is the next one's start) and fill the data are fine."""
    argv, _ = _shard({"a.weight": _tensor(0, 64), "b.weight": _tensor(64, 128)}, 128)(tmp_path)
    proc = cli(*argv, "--json", timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout)
