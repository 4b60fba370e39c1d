"""The native check on real shared objects compiled here: the reader held to `readelf -d`, `objdump -T` and
`ldd` on the same files; audit and verify on a venv whose library needs a newer glibc (even with its import
wrapped in a `try`), on NNAL's libatb.so unresolved and resolved, and on an NNAL of another CANN release."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Set

import pytest
from helpers.fake_dists import clean_venv, fake_install, make_venv, site_of

from ascend_setup.dists.installed import read_venv
from ascend_setup.host.cann import primary_cann
from ascend_setup.host.machine import glibc_version
from ascend_setup.host.setenv import capture_env
from ascend_setup.knowledge.scan import triage
from ascend_setup.native.elf import ElfNeeds, read_needs
from ascend_setup.native.venv_libs import check_venv, host_target
from ascend_setup.simulate import native_stubs
from ascend_setup.simulate.fake_cann import build_fake_cann

#: The C library and the toolchain decide what these files need: the glibc 2.31 root runs this file too.
pytestmark = [
    pytest.mark.userland,
    pytest.mark.skipif(native_stubs.compiler() is None, reason="no C compiler to build shared objects"),
]

HOST_GLIBC = tuple(int(p) for p in (glibc_version() or "0.0").split("."))
PLUGIN_SO = "vllm_ascend/vllm_ascend_C.cpython-311-x86_64-linux-gnu.so"
#: Compiled on a glibc 2.36 machine against its real C library (tests/data/native/README.md): close_range@GLIBC_2.34.
BUILT_ON_2_36 = Path(__file__).resolve().parents[1] / "data" / "native" / "close_range-glibc-2.36-x86_64.so"


def _tool(*argv: str, env: Optional[Dict[str, str]] = None) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False, env=env, timeout=60).stdout


def _readelf_dynamic(path: Path) -> Dict[str, List[str]]:
    found: Dict[str, List[str]] = {"NEEDED": [], "SONAME": [], "RPATH": [], "RUNPATH": []}
    dynamic = _tool("readelf", "-dW", str(path))
    for kind, value in re.findall(r"\((NEEDED|SONAME|RPATH|RUNPATH)\)\s+.*?\[(.*)\]", dynamic):
        found[kind] += value.split(":") if kind in ("RPATH", "RUNPATH") else [value]
    return found


def _objdump_symbols(path: Path) -> Dict[str, Set[str]]:
    """objdump -T: strong undefined names, defined global/weak names, and the version each undefined one asks."""
    undefined, exported, versions = set(), set(), set()
    for line in _tool("objdump", "-TW", str(path)).splitlines():
        match = re.match(r"^[0-9a-f]+ (.{7}) (\S+)\s+[0-9a-f]+\s+(?:\(?([^()\s]+)\)?\s+)?(\S+)$", line)
        if not match:
            continue
        flags, section, version, name = match.groups()
        if section == "*UND*":
            if version and version != "Base":
                versions.add(version)
            if "w" not in flags:
                undefined.add(name)
        elif flags[0] in "gu" or "w" in flags:
            exported.add(name)
    return {"undefined": undefined, "exported": exported, "versions": versions}


def _ldd(path: Path, env: Dict[str, str]) -> Dict[str, Optional[str]]:
    """ldd's NEEDED closure: {name: path, or None for 'not found'} (the vdso and the loader itself left out)."""
    out = _tool("ldd", str(path), env=env)
    found: Dict[str, Optional[str]] = {}
    for name, where in re.findall(r"^\s+(\S+) => (not found|\S+)", out, re.M):
        found[name] = None if where == "not found" else os.path.realpath(where)
    return found


@pytest.fixture(scope="module")
def library_files(tmp_path_factory) -> Dict[str, Path]:
    """Each kind of test file the simulated world carries, and two of this machine's own libraries."""
    root = tmp_path_factory.mktemp("libs")
    made = {
        "plain": native_stubs.plain_library(),
        "libatb": native_stubs.nnal_libatb("9.1.0"),
        "plugin": native_stubs.plugin_extension("9.1.0"),
        "post231": native_stubs.post_231_library(),
        "glibc-2.99": native_stubs.stand_in_glibc_library("2.99"),
    }
    files = {}
    for name, data in made.items():
        assert data is not None
        files[name] = root / f"{name}.so"
        files[name].write_bytes(data)
    if BUILT_ON_2_36.exists() and os.uname().machine == "x86_64":
        files["built-on-2.36"] = BUILT_ON_2_36
    for name in ("libstdc++.so.6", "libz.so.1"):
        system = next(
            (
                Path(d) / name
                for d in ("/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib64", "/lib64")
                if (Path(d) / name).exists()
            ),
            None,
        )
        if system is not None:
            files[name] = Path(os.path.realpath(system))
    return files


KINDS = ["plain", "libatb", "plugin", "post231", "glibc-2.99", "built-on-2.36", "libstdc++.so.6", "libz.so.1"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_reader_agrees_with_readelf_and_objdump(library_files: Dict[str, Path], kind: str) -> None:
    if kind not in library_files:
        pytest.skip(f"no {kind} on this machine")
    path = library_files[kind]
    needs = read_needs(path)
    dynamic = _readelf_dynamic(path)
    assert list(needs.needed) == dynamic["NEEDED"]
    assert ([needs.soname] if needs.soname else []) == dynamic["SONAME"]
    assert list(needs.rpath) == dynamic["RPATH"] and list(needs.runpath) == dynamic["RUNPATH"]
    symbols = _objdump_symbols(path)
    assert set(needs.undefined) == symbols["undefined"]
    assert needs.exported == symbols["exported"]
    asked = {v for versions in needs.version_needs.values() for v in versions}
    assert symbols["versions"] <= asked  # objdump names the versions symbols ask; version_r may list more
    references = _tool("objdump", "-p", str(path))
    for file, versions in needs.version_needs.items():
        assert f"required from {file}:" in references
        for version in versions:
            assert re.search(rf"\s{re.escape(version)}\s*$", references, re.M), version


@pytest.mark.parametrize("kind", KINDS)
def test_the_resolver_agrees_with_ldd(library_files: Dict[str, Path], kind: str, tmp_path: Path) -> None:
    """What each NEEDED of the load resolves to, or that it resolves nowhere: ours against ldd, with and without
    a directory on LD_LIBRARY_PATH that holds libatb.so."""
    if kind not in library_files:
        pytest.skip(f"no {kind} on this machine")
    atb_dir = tmp_path / "atb"
    atb_dir.mkdir()
    (atb_dir / "libatb.so").write_bytes(library_files["libatb"].read_bytes())
    for n, extra in enumerate(("", str(atb_dir))):
        env = {**os.environ, "LD_LIBRARY_PATH": extra}
        venv = make_venv(tmp_path / f"v{n}")
        fake_install(venv, "holder", "1.0", files={"holder/lib.so": library_files[kind].read_bytes()})
        report = check_venv(read_venv(venv), host_target(env))
        ours_missing = {p.problem.needs for p in report.problems if p.problem.kind == "unresolved"}
        ldd = _ldd(site_of(venv) / "holder" / "lib.so", env)
        assert ours_missing == {name for name, where in ldd.items() if where is None}, (ldd, report.problems)


def _venv_with(tmp_path: Path, data: bytes, dist: str = "stub-ext", wrapped: bool = True) -> Path:
    """A venv whose `dist` ships `data` as an extension its package imports inside try/except (as vllm_ascend
    does with vllm_ascend_C: a failed load is a warning)."""
    venv = clean_venv(tmp_path / "v")
    module = dist.replace("-", "_")
    init = (
        (
            f"try:\n    from . import _ext  # noqa: F401\nexcept ImportError as exc:\n"
            f"    import warnings; warnings.warn(f'Failed to import {module}._ext: {{exc}}')\n"
        )
        if wrapped
        else ""
    )
    fake_install(
        venv, dist, "1.0", files={f"{module}/__init__.py": init, f"{module}/_ext.cpython-311-x86_64-linux-gnu.so": data}
    )
    return venv


def test_audit_names_a_library_that_needs_a_newer_glibc(cli, tmp_path: Path) -> None:
    """Built here (glibc 2.36) calling close_range (GLIBC_2.34): on glibc 2.31, by --glibc here and natively
    in the 2.31 root, a finding naming the file, its distribution, GLIBC_2.34, the target's 2.31 and the fix."""
    venv = _venv_with(tmp_path, native_stubs.post_231_library() or b"")
    args = ["--glibc", "2.31"] if HOST_GLIBC >= (2, 34) else []
    proc = cli("audit", "--venv", str(venv), "--json", *args)
    assert proc.returncode == 1, proc.stdout
    found = [f for f in json.loads(proc.stdout)["findings"] if f["id"] == "native-glibc"]
    assert len(found) == 1, found
    finding = found[0]
    assert finding["package"] == "stub-ext" and finding["severity"] == "error"
    assert "stub_ext/_ext.cpython-311-x86_64-linux-gnu.so needs GLIBC_2.34" in finding["message"]
    assert "has glibc 2.31" in finding["message"] and "stub-ext 1.0" in finding["message"]
    glibc_fix = triage(["ImportError: /lib/libc.so.6: version `GLIBC_2.34' not found"])
    assert glibc_fix is not None and finding["fix"].startswith(glibc_fix.fix)
    assert "--no-binary stub-ext stub-ext==1.0" in finding["fix"]
    if HOST_GLIBC >= (2, 34):  # and this host's own glibc has it: no finding without --glibc
        proc = cli("audit", "--venv", str(venv), "--json")
        assert not [f for f in json.loads(proc.stdout)["findings"] if f["id"].startswith("native")]


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the library built on glibc 2.36 is x86_64")
def test_a_library_built_on_glibc_2_36_is_found_and_fails_verify(cli, tmp_path: Path) -> None:
    """Not a stand-in: a library compiled on a glibc 2.36 machine against its real C library. In the glibc 2.31
    root, audit names it natively and verify fails on it though the real loader's error is caught by the import's
    `try`; elsewhere audit names it for --glibc 2.31."""
    from helpers.session import session_for

    from ascend_setup.steps.verify import native_problems

    venv = _venv_with(tmp_path, BUILT_ON_2_36.read_bytes())
    args = ["--glibc", "2.31"] if HOST_GLIBC >= (2, 34) else []
    proc = cli("audit", "--venv", str(venv), "--json", *args)
    assert proc.returncode == 1, proc.stdout
    found = [f for f in json.loads(proc.stdout)["findings"] if f["id"].startswith("native")]
    assert [f["id"] for f in found] == ["native-glibc"], found
    target = ".".join(map(str, HOST_GLIBC)) if HOST_GLIBC < (2, 34) else "2.31"
    assert "stub_ext/_ext.cpython-311-x86_64-linux-gnu.so needs GLIBC_2.34" in found[0]["message"]
    assert f"has glibc {target}" in found[0]["message"] and "stub-ext 1.0" in found[0]["message"]
    assert "--no-binary stub-ext stub-ext==1.0" in found[0]["fix"]
    if HOST_GLIBC >= (2, 34):
        return
    python = venv / "bin" / "python"
    imported = subprocess.run(
        [str(python), "-W", "always", "-c", "import stub_ext; print('imported')"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert imported.stdout.strip() == "imported" and "GLIBC_2.34' not found" in imported.stderr
    problems = native_problems(session_for(tmp_path, venv=str(venv)))
    assert len(problems) == 1 and "needs GLIBC_2.34" in problems[0] and "stub-ext 1.0" in problems[0], problems


def test_a_symbol_of_a_too_new_glibc_is_one_finding(cli, tmp_path: Path) -> None:
    """The loader checks version needs before it binds a symbol: a library whose symbol comes with a glibc newer
    than the target's is one glibc finding, not also an undefined symbol (what the glibc 2.31 root showed for
    close_range@GLIBC_2.34, which 2.31's libc lacks). A symbol no glibc has, at GLIBC_2.99, is that case on any
    host."""
    venv = _venv_with(tmp_path, native_stubs.stand_in_glibc_library("2.99", "ascend_setup_future_call") or b"")
    proc = cli("audit", "--venv", str(venv), "--json")
    found = [f for f in json.loads(proc.stdout)["findings"] if f["id"].startswith("native")]
    assert [f["id"] for f in found] == ["native-glibc"] and proc.returncode == 1, found
    assert "needs GLIBC_2.99" in found[0]["message"], found


def test_verify_fails_on_it_though_the_import_is_caught(tmp_path: Path) -> None:
    """A library needing a glibc newer than this machine's: the package imports (the try catches the loader's
    error, a warning is all), and verify's native check fails on it all the same."""
    from helpers.session import session_for

    from ascend_setup.steps.verify import native_problems

    newer = f"2.{HOST_GLIBC[1] + 1}"
    venv = _venv_with(tmp_path, native_stubs.stand_in_glibc_library(newer) or b"")
    python = venv / "bin" / "python"
    imported = subprocess.run(
        [str(python), "-W", "always", "-c", "import stub_ext; print('imported')"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert imported.stdout.strip() == "imported" and f"GLIBC_{newer}' not found" in imported.stderr
    problems = native_problems(session_for(tmp_path, venv=str(venv)))
    assert len(problems) == 1 and f"needs GLIBC_{newer}" in problems[0] and "stub-ext 1.0" in problems[0], problems


@pytest.fixture()
def nnal(tmp_path: Path):
    def build(version: str):
        cann = build_fake_cann(tmp_path / f"Ascend-{version}", version=version, native_libatb=True)
        found = primary_cann(str(cann.root))
        assert found is not None and found.nnal is not None and found.nnal.set_env
        return cann, capture_env([Path(found.nnal.set_env)]).apply()

    return build


def test_libatb_unresolved_until_nnal_is_sourced(cli, tmp_path: Path, nnal) -> None:
    cann, sourced = nnal("9.1.0")
    venv = _venv_with(tmp_path, native_stubs.plugin_extension("9.1.0") or b"", dist="vllm-ascend-ops")
    proc = cli("audit", "--venv", str(venv), "--json", env={"LD_LIBRARY_PATH": ""})
    found = [f for f in json.loads(proc.stdout)["findings"] if f["id"].startswith("native")]
    assert [f["id"] for f in found] == ["native-unresolved"] and proc.returncode == 1
    assert "needs libatb.so" in found[0]["message"] and "looked in" in found[0]["message"]
    atb_fix = triage(["OSError: libatb.so: cannot open shared object file: No such file or directory"])
    assert atb_fix is not None and found[0]["fix"] == atb_fix.fix
    proc = cli("audit", "--venv", str(venv), "--json", env=sourced)
    assert not [f for f in json.loads(proc.stdout)["findings"] if f["id"].startswith("native")]
    ldd = _ldd(site_of(venv) / "vllm_ascend_ops" / "_ext.cpython-311-x86_64-linux-gnu.so", sourced)
    assert ldd["libatb.so"] == os.path.realpath(next(cann.root.glob("nnal/atb/latest/atb/*/lib/libatb.so")))


def test_an_nnal_of_another_cann_lacks_the_symbol(cli, tmp_path: Path, nnal) -> None:
    """Built against 9.1.0's NNAL, loaded with 9.0.0's: libatb.so resolves, atb_runtime_9_1 does not (as
    `ldd -r` says too)."""
    _cann, sourced = nnal("9.0.0")
    venv = _venv_with(tmp_path, native_stubs.plugin_extension("9.1.0") or b"", dist="vllm-ascend-ops")
    proc = cli("audit", "--venv", str(venv), "--json", env=sourced)
    found = [f for f in json.loads(proc.stdout)["findings"] if f["id"].startswith("native")]
    assert [f["id"] for f in found] == ["native-symbol"], found
    assert "needs symbol atb_runtime_9_1" in found[0]["message"] and "libatb.so" in found[0]["message"]
    ldd_r = _tool(
        "ldd", "-r", str(site_of(venv) / "vllm_ascend_ops" / "_ext.cpython-311-x86_64-linux-gnu.so"), env=sourced
    )
    assert "undefined symbol: atb_runtime_9_1" in ldd_r


def test_the_reader_reads_no_file_whole(library_files: Dict[str, Path]) -> None:
    """Only headers and the dynamic sections: the bytes read of libstdc++ are a fraction of its size."""
    path = library_files.get("libstdc++.so.6")
    if path is None:
        pytest.skip("no libstdc++ here")
    code = (
        "import sys, builtins, io\nfrom pathlib import Path\nimport ascend_setup.native.elf as elf\n"
        "total = 0\nreal = elf.os.fdopen\n"
        "class Counting(io.BufferedReader):\n"
        "    def read(self, n=-1):\n        global total\n        data = super().read(n)\n"
        "        total += len(data)\n        return data\n"
        "elf.os.fdopen = lambda fd, mode: Counting(io.FileIO(fd, 'rb'))\n"
        f"needs = elf.read_needs(Path({str(path)!r}))\nprint(total)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < path.stat().st_size / 4, (done.stdout, path.stat().st_size)


def test_every_needs_field_is_read(library_files: Dict[str, Path]) -> None:
    """The plugin's extension: NEEDED libatb.so, the undefined runtime symbol; libatb: SONAME and its exports."""
    plugin: ElfNeeds = read_needs(library_files["plugin"])
    assert "libatb.so" in plugin.needed and "atb_runtime_9_1" in plugin.undefined
    libatb = read_needs(library_files["libatb"])
    assert libatb.soname == "libatb.so" and "atb_runtime_9_1" in libatb.exported
    post = read_needs(library_files["post231"])
    assert "GLIBC_2.34" in post.version_needs["libc.so.6"] and "close_range" in post.undefined


def test_this_machine_s_cache_matches_ldconfig() -> None:
    from ascend_setup.native.ldcache import read_cache

    if not Path("/etc/ld.so.cache").exists():
        pytest.skip("no ld.so.cache here")
    listed = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    cache = read_cache()
    assert sum(len(paths) for paths in cache.values()) == int(listed.split()[0])


def _compiled(tmp: Path, name: str, source: str, *args: str) -> bytes:
    data = native_stubs._compile(source, name, [f"-L{tmp}", *args])
    (tmp / name).write_bytes(data)
    return data


def test_a_loop_of_needed_is_one_finding_and_no_hang(tmp_path: Path) -> None:
    """libA needs libB needs libA (both found by RUNPATH $ORIGIN): the walk ends, and the loop is one warning,
    whichever of its members the check starts from."""
    tmp = tmp_path / "build"
    tmp.mkdir()
    _compiled(tmp, "libA.so", "int a(void) { return 1; }\n", "-Wl,-soname,libA.so")
    lib_b = _compiled(
        tmp,
        "libB.so",
        "int a(void);\nint b(void) { return a(); }\n",
        "-Wl,-soname,libB.so",
        "-lA",
        "-Wl,-rpath,$ORIGIN",
    )
    lib_a = _compiled(
        tmp,
        "libA.so",
        "int b(void);\nint a(void) { return 1; }\nint c(void) { return b(); }\n",
        "-Wl,-soname,libA.so",
        "-lB",
        "-Wl,-rpath,$ORIGIN",
    )
    venv = make_venv(tmp_path / "v")
    fake_install(venv, "loops", "1.0", files={"loops/libA.so": lib_a, "loops/libB.so": lib_b})
    report = check_venv(read_venv(venv), host_target({}))
    assert [(p.problem.kind, p.distribution) for p in report.problems] == [("loop", "loops")], report.problems
    assert set(report.problems[0].problem.needs.split(" -> ")) == {"libA.so", "libB.so"}
    proc = subprocess.run(["ldd", str(site_of(venv) / "loops" / "libA.so")], capture_output=True, text=True)
    assert "libB.so =>" in proc.stdout and "not found" not in proc.stdout  # the loader copes with it too


def test_a_version_count_that_would_loop_is_one_finding(tmp_path: Path) -> None:
    """.gnu.version_r says 2^32-1 entries, each `next` 0: read as damaged at once, not walked for ever."""
    from ascend_setup.native.elf import SHT_GNU_VERNEED, _Elf

    data = bytearray(native_stubs.post_231_library() or b"")
    path = tmp_path / "x.so"
    path.write_bytes(bytes(data))
    with open(path, "rb") as handle:
        elf = _Elf(handle, len(data))
        index = next(i for i, s in enumerate(elf.sections) if s.type == SHT_GNU_VERNEED)
        shoff = struct.unpack_from("<Q", data, 40)[0]
        offset = elf.sections[index].offset
    struct.pack_into("<I", data, shoff + 64 * index + 44, 0xFFFFFFFF)  # sh_info: the count
    struct.pack_into("<I", data, offset + 12, 0)  # vn_next of the first entry
    venv = make_venv(tmp_path / "v")
    fake_install(venv, "hostile", "1.0", files={"hostile/x.so": bytes(data)})
    report = check_venv(read_venv(venv), host_target({}))
    assert [p.problem.kind for p in report.problems] == ["damaged"] and ".gnu.version_r" in report.problems[
        0
    ].problem.detail


def test_a_wheel_whose_library_needs_more_than_its_tag_claims(tmp_path: Path) -> None:
    """A stub wheel tagged manylinux_2_28 whose library needs GLIBC_2.34 (read from the zip's member, not
    extracted): named for a glibc 2.31 target, and for a 2.34 one as understated only; a truthful wheel is not."""
    from ascend_setup.native.wheel_libs import glibc_lines, tag_glibc, wheel_glibc
    from ascend_setup.simulate.dists import build_wheel

    lib = native_stubs.post_231_library() or b""
    liar = build_wheel(
        tmp_path,
        "fastops",
        "1.0",
        tag="cp311-cp311-manylinux_2_28_x86_64",
        files={"fastops/__init__.py": "", "fastops/_ops.cpython-311-x86_64-linux-gnu.so": lib},
    )
    honest = build_wheel(
        tmp_path, "honestops", "1.0", tag="cp311-cp311-manylinux_2_34_x86_64", files={"honestops/_ops.so": lib}
    )
    plain = build_wheel(
        tmp_path,
        "plainops",
        "1.0",
        tag="cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64",
        files={"plainops/_ops.so": native_stubs.plain_library()},
    )
    found = wheel_glibc(liar)
    assert found.claimed == (2, 28) and found.needed == (2, 34) and found.understated
    assert found.member == "fastops/_ops.cpython-311-x86_64-linux-gnu.so"
    lines = glibc_lines([liar, honest, plain], "2.31")
    assert len(lines) == 2, lines
    assert lines[0].startswith(
        "fastops-1.0-cp311-cp311-manylinux_2_28_x86_64.whl: tagged for glibc 2.28, but "
        "fastops/_ops.cpython-311-x86_64-linux-gnu.so needs GLIBC_2.34"
    )
    assert "the target's glibc 2.31 cannot load it" in lines[0] and "honestops" in lines[1]
    cannot = "the target's glibc 2.31 cannot load it: build that package from source for it"
    assert glibc_lines([liar, honest, plain], "2.34") == [lines[0].replace(cannot, "the target's glibc 2.34 has it")]
    assert tag_glibc(plain.name) == (2, 17) and tag_glibc("x-1.0-py3-none-any.whl") is None


@pytest.mark.parametrize("value", ["2", "glibc-2.31", "2.31; rm -rf /", ""])
def test_a_bad_glibc_is_one_line_and_exit_2(cli, tmp_path: Path, value: str) -> None:
    from helpers.cli import assert_one_line_error

    venv = make_venv(tmp_path / "v")
    assert "--glibc" in assert_one_line_error(cli("audit", "--venv", str(venv), "--glibc", value))


def test_a_library_the_interpreter_already_loaded_resolves_by_name(tmp_path: Path) -> None:
    """An extension whose NEEDED is the shared libpython, with no RPATH: ldd, which knows no interpreter, finds it
    nowhere; under python the loader matches the libpython already loaded, and so does the check."""
    import sysconfig

    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        pytest.skip("this Python is not built with a shared libpython")
    libdir, ldlibrary = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDLIBRARY")
    name = sysconfig.get_config_var("INSTSONAME") or ldlibrary
    data = native_stubs._compile(
        "int uses_python(void) { return 0; }\n", "ext.so", [f"-L{libdir}", "-Wl,--no-as-needed", f"-l:{ldlibrary}"]
    )
    venv = make_venv(tmp_path / "v")
    fake_install(venv, "pyext", "1.0", files={"pyext/ext.so": data})
    assert name in read_needs(site_of(venv) / "pyext" / "ext.so").needed
    report = check_venv(read_venv(venv), host_target({"LD_LIBRARY_PATH": ""}))
    assert report.problems == [], report.problems
    # and it is the interpreter's own libpython, not a namesake ldconfig's cache may list
    from ascend_setup.native.loader import Resolver, _Loaded
    from ascend_setup.native.venv_libs import interpreter_of

    resolver = Resolver(target=host_target({}), venv_root=venv, interpreter=interpreter_of(read_venv(venv)))
    lib = site_of(venv) / "pyext" / "ext.so"
    root = resolver.read(lib)
    assert isinstance(root, ElfNeeds)
    load = resolver._load(_Loaded(root, None, lib.name), resolver._interpreter_load())
    assert os.path.realpath(load.resolved[(lib, name)].path).startswith(os.path.realpath(libdir))


def test_no_symbol_findings_when_the_interpreter_cannot_be_read(tmp_path: Path, nnal) -> None:
    """A venv whose bin/python is a launcher script: the Py* symbols of every extension would look missing, so
    the symbol check says nothing (NEEDED and versions are still checked)."""
    _cann, sourced = nnal("9.0.0")
    venv = _venv_with(tmp_path, native_stubs.plugin_extension("9.1.0") or b"", dist="vllm-ascend-ops")
    (venv / "bin" / "python").unlink()
    (venv / "bin" / "python").write_text("#!/bin/sh\nexec python3 \"$@\"\n")
    report = check_venv(read_venv(venv), host_target(sourced))
    assert [p for p in report.problems if p.problem.kind == "symbol"] == []
    report = check_venv(read_venv(venv), host_target({"LD_LIBRARY_PATH": ""}))
    assert [p.problem.kind for p in report.problems] == ["unresolved"]
