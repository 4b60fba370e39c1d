"""The index client, target tags and file choice, checked against real pip on a loopback index."""

from __future__ import annotations

import platform
import socket
import subprocess
import venv as venv_module
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from helpers.cli import clean_env
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag

from ascend_setup.errors import BadInput
from ascend_setup.host.machine import glibc_version
from ascend_setup.index.choose import choose
from ascend_setup.index.metadata import MetadataReader
from ascend_setup.index.simple import IndexSet, SimpleIndex
from ascend_setup.index.tags import Target, platforms, supported_tags
from ascend_setup.simulate.dists import build_sdist, build_wheel
from ascend_setup.simulate.index_server import Behaviour, LocalIndex

#: What the OS's userland (glibc, the Python build, venv, the trust store, the toolchain, the disk) can
#: change: the glibc 2.31 root runs this file too.
pytestmark = pytest.mark.userland

X86 = "x86_64"

#: (name, version, tag or "sdist", extra options)
ASSORTED = [
    ("alpha", "1.0", "cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64", {}),
    ("alpha", "2.0", "cp311-cp311-manylinux_2_34_x86_64", {}),
    ("alpha", "2.0", "sdist", {}),
    ("beta", "1.0", "cp38-abi3-manylinux_2_28_x86_64", {}),
    ("beta", "1.0", "py3-none-any", {}),
    ("gamma", "3.0", "py3-none-any", {"yanked": True}),
    ("gamma", "2.0", "py3-none-any", {}),
    ("delta", "1.0", "cp311-cp311-linux_x86_64", {}),
    ("delta", "1.0", "sdist", {}),
    ("epsilon", "1.0", "py3-none-any", {"requires_python": ">=3.12"}),
    ("epsilon", "0.9", "py3-none-any", {}),
    ("zeta", "1.0", "cp312-cp312-manylinux_2_17_x86_64", {}),
    ("zeta", "1.0", "sdist", {}),
    ("eta", "2.0", "py3-none-any", {}),
    ("eta", "2.0", "cp311-cp311-manylinux_2_28_x86_64", {}),
    ("theta", "1.0rc1", "py3-none-any", {}),
    ("iota", "1.0", "py3-none-any", {"build": "1"}),
    ("iota", "1.0", "py3-none-any", {"build": "2"}),
    ("kappa", "1.0", "cp311-cp311-manylinux1_x86_64", {}),
    ("lambda", "1.0", "cp311-cp311-manylinux_2_17_aarch64", {}),
    ("lambda", "1.0", "sdist", {}),
    ("mu", "5.0", "cp311-cp311-manylinux_2_31_x86_64", {}),
    ("mu", "4.0", "cp310-cp310-manylinux_2_17_x86_64", {}),
]
NAMES = sorted({n for n, *_ in ASSORTED})


@pytest.fixture(scope="module")
def assorted_index(tmp_path_factory) -> LocalIndex:
    root = tmp_path_factory.mktemp("assorted")
    index = LocalIndex()
    for name, version, tag, opts in ASSORTED:
        if tag == "sdist":
            path = build_sdist(root, name, version)
        else:
            path = build_wheel(root, name, version, tag=tag, build=opts.get("build"), requires=[f"dep-of-{name}>=1"])
        index.add(
            path,
            yanked=opts.get("yanked", False),
            requires_python=opts.get("requires_python"),
            metadata=(name == "beta"),
        )
    yield index
    index.close()


def test_target_tags_follow_the_rules() -> None:
    target = Target.parse("2.31", "aarch64", "3.11")
    tags = supported_tags(target)
    assert tags[0] == Tag("cp311", "cp311", "manylinux_2_31_aarch64")
    assert Tag("cp311", "abi3", "manylinux2014_aarch64") in tags
    assert Tag("cp32", "abi3", "manylinux_2_17_aarch64") in tags
    assert Tag("py3", "none", "any") in tags
    plats = [t.platform for t in tags if t.platform != "any"]
    assert plats[-1] == "linux_aarch64"  # pip takes these from any index that serves them, last
    assert not any("2_34" in t.platform or "x86_64" in t.platform for t in tags)
    assert platforms(Target.parse("2.17", "x86_64", "3.11"))[-2:] == ["manylinux1_x86_64", "linux_x86_64"]
    assert "manylinux2010_x86_64" in platforms(Target.parse("2.31", "x86_64", "3.11"))
    assert "manylinux2010_aarch64" not in platforms(target)


@pytest.mark.parametrize(
    "glibc, arch, python", [("2.x", "aarch64", "3.11"), ("2.31", "sparc", "3.11"), ("2.31", "aarch64", "three")]
)
def test_bad_target_is_bad_input(glibc: str, arch: str, python: str) -> None:
    with pytest.raises(BadInput):
        Target.parse(glibc, arch, python)


def test_json_and_html_pages_agree(assorted_index: LocalIndex) -> None:
    json_page = SimpleIndex(assorted_index.url).project("gamma")
    assorted_index.behaviour.json_pages = False
    try:
        html_page = SimpleIndex(assorted_index.url).project("gamma")
    finally:
        assorted_index.behaviour.json_pages = True

    def key(f):
        return (f.filename, f.sha256, f.yanked, f.requires_python)

    assert sorted(map(key, json_page.files)) == sorted(map(key, html_page.files))
    assert {f.filename: f.yanked for f in json_page.files} == {
        "gamma-3.0-py3-none-any.whl": True,
        "gamma-2.0-py3-none-any.whl": False,
    }
    assert all(len(f.sha256) == 64 for f in json_page.files)
    assert all(f.size for f in json_page.files) and not any(f.size for f in html_page.files)


def test_missing_garbage_and_unreachable_indexes(assorted_index: LocalIndex) -> None:
    assert SimpleIndex(assorted_index.url).project("no-such-thing").found is False
    junk = LocalIndex(Behaviour(garbage=True))
    try:
        page = SimpleIndex(junk.url).project("alpha")
        assert page.error and "did not return a simple-API page" in page.error and junk.url in page.error
    finally:
        junk.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    page = SimpleIndex(f"http://127.0.0.1:{port}/simple/").project("alpha")
    assert page.error and f"127.0.0.1:{port}" in page.error and "could not be reached" in page.error


def test_file_index(tmp_path: Path) -> None:
    project = tmp_path / "simple" / "alpha"
    build_wheel(project, "alpha", "1.0")
    page = SimpleIndex((tmp_path / "simple").as_uri()).project("alpha")
    assert [f.filename for f in page.files] == ["alpha-1.0-py3-none-any.whl"]
    assert "does not exist" in SimpleIndex((tmp_path / "nope").as_uri()).project("alpha").error


def test_metadata_without_full_downloads(assorted_index: LocalIndex) -> None:
    indexes = IndexSet([assorted_index.url])
    reader = MetadataReader()
    pep658 = next(f for f in indexes.pages("beta")[0].files if f.kind == "wheel")
    assorted_index.requests.clear()
    assert reader.requires(pep658) == ["dep-of-beta>=1"]
    assert [p for p, _ in assorted_index.requests] == [f"/files/{pep658.filename}.metadata"]
    ranged = next(f for f in indexes.pages("eta")[0].files if "manylinux" in f.filename)
    assorted_index.requests.clear()
    assert reader.requires(ranged) == ["dep-of-eta>=1"]
    assert assorted_index.requests and all("Range" in h for _, h in assorted_index.requests)
    sdist = next(f for f in indexes.pages("zeta")[0].files if f.kind == "sdist")
    assert "Version: 1.0" in reader.metadata(sdist)
    count = len(assorted_index.requests)
    reader.requires(ranged)
    assert len(assorted_index.requests) == count  # cached per run


def _pip_venv(root: Path, glibc: str) -> Path:
    venv_module.create(root, with_pip=True)
    site = next((root / "lib").glob("python3*/site-packages"))
    major, minor = glibc.split(".")
    (site / "_manylinux.py").write_text(
        "def manylinux_compatible(tag_major, tag_minor, tag_arch, **_):\n"
        f"    return (tag_major, tag_minor) <= ({major}, {minor})\n"
    )
    return root / "bin" / "python"


def _pip_download(
    python: Path, index: str, names: List[str], dest: Path, home: Path, platform_tags: Optional[List[str]] = None
) -> subprocess.CompletedProcess:
    explicit = [arg for tag in platform_tags or [] for arg in ("--platform", tag)]
    return subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.11",
            *explicit,
            "--index-url",
            index,
            "-d",
            str(dest),
            "-q",
            *names,
        ],
        capture_output=True,
        text=True,
        env=clean_env(home),
        timeout=300,
    )


@pytest.mark.parametrize("glibc", ["2.17", "2.28", "2.31", "2.35"])
def test_forecast_equals_real_pip(assorted_index: LocalIndex, tmp_path: Path, home: Path, glibc: str) -> None:
    """Where this host can play the target (same arch, glibc not newer than its own), pip's own glibc
    detection decides (narrowed by PEP 600's _manylinux.py); elsewhere real pip gets the target's
    platform tags explicitly. Either way the file choice is pip's, and must equal ours."""
    target = Target.parse(glibc, X86, "3.11")
    indexes = IndexSet([assorted_index.url])
    ours: Dict[str, str] = {}
    for name in NAMES:
        choice = choose(name, indexes.pages(name), SpecifierSet(), target, binary_only=True)
        ours[name] = choice.file.filename if choice.file else "unavailable"
    host_glibc = glibc_version()
    playable = (
        platform.machine() == X86
        and host_glibc is not None
        and tuple(map(int, host_glibc.split("."))) >= target.glibc_tuple
    )
    python = _pip_venv(tmp_path / "venv", glibc)
    tags = None if playable else platforms(target)
    available = [n for n in NAMES if ours[n] != "unavailable"]
    dest = tmp_path / "dl"
    proc = _pip_download(python, assorted_index.url, available, dest, home, tags)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in dest.iterdir()) == sorted(ours[n] for n in available)
    for name in NAMES:
        if ours[name] == "unavailable":
            proc = _pip_download(python, assorted_index.url, [name], tmp_path / f"dl-{name}", home, tags)
            assert proc.returncode != 0 and "No matching distribution" in proc.stderr, (name, proc.stdout)


def test_sdist_outcomes_say_why(assorted_index: LocalIndex) -> None:
    indexes = IndexSet([assorted_index.url])
    t231 = Target.parse("2.31", X86, "3.11")
    alpha = choose("alpha", indexes.pages("alpha"), SpecifierSet(), t231)
    assert (alpha.outcome, alpha.version) == ("sdist", "2.0")
    assert "newest wheel needs glibc 2.34" in alpha.reason
    assert choose("alpha", indexes.pages("alpha"), SpecifierSet(), Target.parse("2.35", X86, "3.11")).outcome == "wheel"
    zeta = choose("zeta", indexes.pages("zeta"), SpecifierSet(), t231)
    assert zeta.outcome == "sdist" and "no wheel for cp311" in zeta.reason
    lam = choose("lambda", indexes.pages("lambda"), SpecifierSet(), t231)
    assert lam.outcome == "sdist" and "no x86_64 wheel" in lam.reason
    lam_arm = choose("lambda", indexes.pages("lambda"), SpecifierSet(), Target.parse("2.31", "aarch64", "3.11"))
    assert lam_arm.outcome == "wheel"
    gone = choose("gamma", indexes.pages("gamma"), SpecifierSet("==4.0"), t231)
    assert gone.outcome == "unavailable" and "has only 3.0, 2.0" in gone.reason
    yanked_pin = choose("gamma", indexes.pages("gamma"), SpecifierSet("==3.0"), t231)
    assert yanked_pin.version == "3.0"  # a yanked file is taken only when nothing else matches
    mu = choose("mu", indexes.pages("mu"), SpecifierSet(), Target.parse("2.28", X86, "3.11"))
    assert mu.outcome == "unavailable"
    delta = choose("delta", indexes.pages("delta"), SpecifierSet(), t231)
    assert delta.outcome == "wheel" and "linux_* wheel" in delta.reason


def test_server_errors_are_retried(assorted_index: LocalIndex) -> None:
    assorted_index.behaviour.fail_first = 2
    try:
        page = SimpleIndex(assorted_index.url).project("alpha")
    finally:
        assorted_index.behaviour.fail_first = 0
    assert page.error is None and len(page.files) == 3
    assorted_index.behaviour.fail_first = 5
    try:
        page = SimpleIndex(assorted_index.url).project("beta")
    finally:
        assorted_index.behaviour.fail_first = 0
    assert page.error and "503" in page.error


class _MirrorTest:
    """A stand-in index for the gate: every project has version 1.0, except that asking for torch runs
    `on_torch` first (a sleep, a crash)."""

    url = "http://mirror.test/simple/"

    def __init__(self, on_torch) -> None:
        self.on_torch = on_torch

    def project_url(self, name: str) -> str:
        return self.url + name + "/"

    def project(self, name: str):
        from ascend_setup.index.simple import ProjectPage, make_file

        if name == "torch":
            self.on_torch()
        return ProjectPage(
            name, self.url, [make_file(f"{name}-1.0-py3-none-any.whl", f"{self.url}{name}.whl", self.url)]
        )


def test_a_page_that_never_came_is_not_a_missing_version() -> None:
    """The gate tells 'this index did not answer for torch' from 'this index lacks torch 2.10.0'."""
    import time as clock

    from ascend_setup.index.reach import IndexNeed, check_indexes

    need = IndexNeed("mirror", [_MirrorTest.url], {"torch": "2.10.0", "numpy": "1.0", "vllm": "2.0"})
    start = clock.monotonic()
    (check,) = check_indexes([need], deadline=0.5, indexes={_MirrorTest.url: _MirrorTest(lambda: clock.sleep(3))})
    assert clock.monotonic() - start < 1.5
    assert check.unanswered == {"torch": "no answer within 0 s"} or set(check.unanswered) == {"torch"}
    assert set(check.missing) == {"vllm"} and "has only 1.0" in check.missing["vllm"]
    assert "did not answer for torch==2.10.0" in check.message() and "no index serves torch" not in check.message()


def test_a_page_whose_fetch_crashed_says_why_and_is_no_timeout() -> None:
    """A call that raised finished: the gate names its cause, where it used to say 'no answer within 10 s'."""
    from ascend_setup.index.reach import IndexNeed, check_indexes

    def crash() -> None:
        raise RecursionError("maximum recursion depth exceeded")

    need = IndexNeed("mirror", [_MirrorTest.url], {"torch": "2.10.0", "numpy": "1.0"})
    (check,) = check_indexes([need], deadline=5, indexes={_MirrorTest.url: _MirrorTest(crash)})
    assert check.unanswered == {"torch": "RecursionError: maximum recursion depth exceeded"}
    assert not check.missing and "no answer within" not in check.message()


def test_one_commands_pools_share_the_pages_that_answered(assorted_index: LocalIndex) -> None:
    """Two consumers (a gate, a closure) each with their own pool: a page that answered is fetched once; one
    that failed is asked again by the next pool, which may have a longer deadline."""
    from ascend_setup.index.simple import IndexPool, SharedPages

    shared = SharedPages()

    def fetches(name: str) -> int:
        return sum(1 for path, _ in assorted_index.requests if path.rstrip("/").endswith(f"/{name}"))

    before = fetches("alpha")
    for _ in range(2):
        pool = IndexPool(shared)
        page = pool.setdefault(assorted_index.url, SimpleIndex(assorted_index.url, attempts=1)).project("alpha")
        assert page.error is None and len(page.files) == 3
        assert IndexSet([assorted_index.url], pool=pool).pages("alpha")[0] is page
    assert fetches("alpha") == before + 1
    assorted_index.behaviour.fail_first = 1
    try:
        failed = IndexPool(shared).setdefault(assorted_index.url, SimpleIndex(assorted_index.url, attempts=1))
        assert failed.project("gamma").error
        assert IndexSet([assorted_index.url], pool=IndexPool(shared)).pages("gamma")[0].error is None
    finally:
        assorted_index.behaviour.fail_first = 0


def test_a_second_source_answers_for_an_index_url() -> None:
    """What an offline bundle plugs into: a PageSource behind a URL answers for it, and nothing is fetched."""
    from ascend_setup.index.simple import IndexPool, ProjectPage, SharedPages

    asked: List[str] = []

    class Listing:
        def project(self, name: str) -> ProjectPage:
            asked.append(name)
            return ProjectPage(name, "http://bundle.invalid/simple/", found=False)

    pool = IndexPool(SharedPages(sources={"http://bundle.invalid/simple": Listing()}))
    page = IndexSet(["http://bundle.invalid/simple/"], pool=pool).pages("torch")[0]
    assert asked == ["torch"] and page.found is False and page.error is None
