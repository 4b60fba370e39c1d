"""Mirror ranking against shaped loopback servers: freshness first, fair throughput, within budget."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import pytest
from helpers.cli import assert_one_line_error
from helpers.mirror_farm import build_farm

from ascend_setup.index.download import download, sha256_of
from ascend_setup.index.tags import Target
from ascend_setup.matrix import load_matrix
from ascend_setup.mirrors.apply import pip_conf_text
from ascend_setup.mirrors.rank import gated_packages, rank_mirrors
from ascend_setup.simulate.index_server import Behaviour, BlackHole, LocalIndex

ROW = load_matrix().rows["9.1.0"].for_arch(platform.machine())
TARGET = Target(glibc="2.31", arch=platform.machine(), python="3.11")
EXPECTED = {
    "fast": "ok",
    "medium": "slow",
    "crawler": "slow",
    "stall": "timeout",
    "404": "error",
    "stale": "stale",
    "garbage": "error",
    "refused": "error",
}


@pytest.fixture(scope="module")
def farm(tmp_path_factory):
    farm = build_farm(tmp_path_factory.mktemp("farm"), gated_packages(ROW), platform.machine())
    yield farm
    farm.close()


def test_ranking_picks_the_fastest_fresh_mirror(farm) -> None:
    start = time.monotonic()
    ranking = rank_mirrors(farm.urls(), ROW, TARGET, budget=5.0)
    took = time.monotonic() - start
    assert ranking.chosen == farm.url("fast")
    statuses = {farm.shape_of(m.url): m.status for m in ranking.mirrors}
    assert statuses == EXPECTED, {farm.shape_of(m.url): (m.status, m.detail) for m in ranking.mirrors}
    details = {farm.shape_of(m.url): m.detail for m in ranking.mirrors}
    assert "HTTP 404" in details["404"] and "torch-npu==2.10.0.post4" in details["stale"]
    assert "simple-API page" in details["garbage"] and "could not be reached" in details["refused"]
    assert ranking.sample and ranking.sample.startswith("torch_npu-2.10.0")
    by = {farm.shape_of(m.url): m for m in ranking.mirrors}
    assert by["fast"].throughput_bps > 4 * by["crawler"].throughput_bps
    assert 150_000 < by["crawler"].throughput_bps < 600_000  # the 300 kB/s crawler is measured as such
    assert by["fast"].ttfb_s is not None and by["medium"].ttfb_s is not None
    assert took < 5.0 + 1.5, took  # the budget, plus page fetches


def test_a_mirror_whose_pages_crashed_is_an_error_with_its_cause(farm, monkeypatch) -> None:
    """A page fetch that raised is no timeout: the mirror is an error, and the detail names the cause."""
    from ascend_setup.index.simple import SimpleIndex

    real = SimpleIndex.project
    broken = farm.url("medium")

    def project(self, name):
        if self.url == broken:
            raise RecursionError("maximum recursion depth exceeded")
        return real(self, name)

    monkeypatch.setattr(SimpleIndex, "project", project)
    ranking = rank_mirrors([farm.url("fast"), broken], ROW, TARGET, budget=3.0)
    by = {farm.shape_of(m.url): m for m in ranking.mirrors}
    assert (by["medium"].status, by["medium"].detail) == ("error", "RecursionError: maximum recursion depth exceeded")
    assert ranking.chosen == farm.url("fast")


def test_mirrors_command_json_cache_and_apply(cli, farm, tmp_path: Path) -> None:
    import venv as venv_module

    venv = tmp_path / "venv"
    venv_module.create(venv, with_pip=False)
    argv = [
        "mirrors",
        "--cann",
        "9.1.0",
        "--only",
        "--json",
        "--workdir",
        str(tmp_path / "wd"),
        "--apply",
        "--venv",
        str(venv),
    ]
    for shape in ("crawler", "fast", "stale", "404"):
        argv += ["--candidate", farm.url(shape)]
    proc = cli(*argv)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["chosen"] == farm.url("fast")
    assert {"url", "status", "ttfb_s", "throughput_bps", "detail"} <= set(data["mirrors"][0])
    cache = json.loads((tmp_path / "wd" / "mirrors.json").read_text())
    assert cache["result"]["chosen"] == farm.url("fast") and cache["fallbacks"] == []
    conf = (venv / "pip.conf").read_text()
    assert conf == pip_conf_text(farm.url("fast"), [])  # named indexes serve only their packages
    assert 'index-url = "' + farm.url("fast") in (venv / "uv.toml").read_text()


def test_no_usable_mirror_exits_1(cli, farm, tmp_path: Path) -> None:
    proc = cli(
        "mirrors",
        "--cann",
        "9.1.0",
        "--only",
        "--candidate",
        farm.url("stale"),
        "--candidate",
        farm.url("404"),
        "--workdir",
        str(tmp_path),
        "--json",
    )
    assert proc.returncode == 1 and json.loads(proc.stdout)["chosen"] is None


def test_missing_file_index_is_an_error_not_a_crash(cli, tmp_path: Path) -> None:
    proc = cli(
        "mirrors",
        "--cann",
        "9.1.0",
        "--only",
        "--candidate",
        (tmp_path / "nowhere").as_uri(),
        "--workdir",
        str(tmp_path),
        "--json",
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    entry = json.loads(proc.stdout)["mirrors"][0]
    assert entry["status"] == "error" and "does not exist" in entry["detail"]


def test_mirrors_bad_input(cli, tmp_path: Path) -> None:
    assert "--venv" in assert_one_line_error(cli("mirrors", "--apply"))
    assert "--candidate" in assert_one_line_error(cli("mirrors", "--only"))
    assert "not a venv" in assert_one_line_error(cli("mirrors", "--apply", "--venv", str(tmp_path)))
    assert "not an http" in assert_one_line_error(cli("mirrors", "--candidate", "mirror.example"))


def test_download_fails_over_and_resumes_from_the_same_byte(tmp_path: Path) -> None:
    blob = tmp_path / "files" / "big-1.0.tar.gz"
    blob.parent.mkdir()
    blob.write_bytes(bytes(range(256)) * 8192)  # 2 MiB
    stalling, good = LocalIndex(Behaviour(stall_after_bytes=700_000)), LocalIndex()
    try:
        stalling.add(blob)
        good.add(blob)
        moves = []
        part = tmp_path / "dl" / f"{blob.name}.part"
        dest = download(
            [f"{stalling.base}/files/{blob.name}", f"{good.base}/files/{blob.name}"],
            tmp_path / "dl" / blob.name,
            sha256=sha256_of(blob),
            size=blob.stat().st_size,
            stall_seconds=1.0,
            on_failover=lambda url, why: moves.append((url, part.stat().st_size)),
        )
        assert dest.read_bytes() == blob.read_bytes()
        assert len(moves) == 1 and moves[0][0].startswith(stalling.base)
        ranged = [h.get("Range") for p, h in good.requests if p.endswith(blob.name)]
        assert moves[0][1] > 0 and ranged == [f"bytes={moves[0][1]}-"]  # continued from the byte it had
        assert not (tmp_path / "dl" / f"{blob.name}.part").exists()
    finally:
        stalling.close()
        good.close()


def test_download_rejects_a_wrong_hash(tmp_path: Path) -> None:
    blob = tmp_path / "x-1.0.tar.gz"
    blob.write_bytes(b"payload" * 1000)
    server = LocalIndex()
    try:
        server.add(blob)
        with pytest.raises(Exception) as err:
            download([f"{server.base}/files/{blob.name}"], tmp_path / "dl" / blob.name, sha256="0" * 64)
        assert "does not match" in str(err.value)
        assert not (tmp_path / "dl" / blob.name).exists()
    finally:
        server.close()


def test_install_mirror_step_measures_once_then_reuses(farm, tmp_path: Path, monkeypatch) -> None:
    from ascend_setup.mirrors.choice import choose_for_install

    monkeypatch.setenv("PIP_INDEX_URL", farm.url("crawler"))  # "pip's configured index", a slow one
    matrix = load_matrix().model_copy(update={"well_known_mirrors": (farm.url("stale"), farm.url("fast"))})
    log = tmp_path / "mirror.log"
    chosen, source, fallbacks = choose_for_install(matrix, ROW, tmp_path, "3.11", log)
    assert chosen == farm.url("fast") and source == "fastest fresh mirror" and fallbacks == []
    assert "stale" in log.read_text()
    start = time.monotonic()
    again = choose_for_install(matrix, ROW, tmp_path, "3.11", log)
    assert again[0] == chosen and "cached" in again[1] and time.monotonic() - start < 0.5


def test_apply_global_uses_pip_config_in_the_users_home(cli, farm, home: Path, tmp_path: Path) -> None:
    proc = cli(
        "mirrors",
        "--cann",
        "9.1.0",
        "--only",
        "--candidate",
        farm.url("fast"),
        "--apply",
        "--global",
        "--workdir",
        str(tmp_path),
        env={"PIP_CONFIG_FILE": ""},
    )
    assert proc.returncode == 0, proc.stderr
    written = (home / ".config" / "pip" / "pip.conf").read_text()
    assert f"index-url = {farm.url('fast')}" in written


def test_install_download_knows_the_same_file_on_fallback_mirrors(farm, tmp_path: Path) -> None:
    from helpers.session import session_for

    from ascend_setup.simulate.dists import build_sdist
    from ascend_setup.steps.outputs import MirrorChoice
    from ascend_setup.steps.plugin import alternate_urls

    sdist = build_sdist(tmp_path, "vllm-ascend", "0.23.0")
    mirror_b = LocalIndex()
    try:
        mirror_b.add(sdist)
        ctx = session_for(
            tmp_path,
            outputs={"mirror": MirrorChoice(index_url=farm.url("fast"), fallbacks=[farm.url("fast"), mirror_b.url])},
        )
        assert alternate_urls(ctx, sdist.name) == [f"{mirror_b.base}/files/{sdist.name}"]
        assert alternate_urls(session_for(tmp_path), sdist.name) == []
    finally:
        mirror_b.close()


def test_the_cached_ranking_serves_every_python(farm, tmp_path: Path) -> None:
    """`mirrors` (whatever Python it samples for) and `install` (its own interpreter's) share one ranking."""
    from ascend_setup.mirrors.choice import load_cached, ranked

    matrix = load_matrix()
    urls = [farm.url("fast"), farm.url("crawler")]
    made = Target(glibc=TARGET.glibc, arch=TARGET.arch, python="3.12")
    data, cached = ranked(matrix, ROW, tmp_path, target=made, urls=urls, budget=3.0, use_cache=False)
    assert not cached and data["result"]["chosen"] == farm.url("fast")
    install = Target(glibc=TARGET.glibc, arch=TARGET.arch, python="3.11")
    assert load_cached(tmp_path, ROW, install, urls) is not None
    assert load_cached(tmp_path, ROW, install, urls[:1]) is None  # another candidate set is another ranking


def test_the_budget_holds_against_black_holes_and_dead_names(cli, farm, tmp_path: Path) -> None:
    holes = [BlackHole() for _ in range(4)]
    try:
        bad = [h.url for h in holes] + [f"http://mirror{i}.invalid/simple/" for i in range(4)]
        argv = ["mirrors", "--cann", "9.1.0", "--only", "--json", "--budget", "3", "--workdir", str(tmp_path / "wd")]
        start = time.monotonic()
        proc = cli(*argv, *[a for url in [*bad, farm.url("fast")] for a in ("--candidate", url)])
        took = time.monotonic() - start
        assert proc.returncode == 0 and json.loads(proc.stdout)["chosen"] == farm.url("fast"), proc.stdout[-2000:]
        assert took <= 3.5 + 1.0, took  # the budget, plus the interpreter's start-up
        # all bad: nothing chosen, and nothing cached that would fail the next run
        proc = cli(*argv, *[a for url in bad[:2] for a in ("--candidate", url)])
        assert proc.returncode == 1 and json.loads(proc.stdout)["chosen"] is None
        assert (
            not (tmp_path / "wd" / "mirrors.json").exists()
            or json.loads((tmp_path / "wd" / "mirrors.json").read_text())["result"]["chosen"]
        )
        proc = cli(*argv, "--candidate", farm.url("fast"))
        assert json.loads(proc.stdout)["chosen"] == farm.url("fast")
    finally:
        for hole in holes:
            hole.close()


def test_an_index_behind_a_slow_resolver_is_ranked_slow_not_dropped(farm, monkeypatch) -> None:
    """A name service that answers after 2.5 s (a resolver's retry), past the pages' 2 s deadline of a 5 s
    budget: the index still answers inside the budget, so it is ranked "slow" (and chosen, being the only
    one), naming the late phase; a black hole next to it still times out, naming where it was stuck."""
    import socket

    real = socket.getaddrinfo
    looked_up = set()

    def resolver(host, *args, **kwargs):  # a loopback resolver stand-in: slow the first time, then cached
        if host == "slow-dns.test":
            if host not in looked_up:
                looked_up.add(host)
                time.sleep(2.5)
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    slow = farm.url("fast").replace("127.0.0.1", "slow-dns.test")
    hole = BlackHole()
    dead = hole.url
    try:
        start = time.monotonic()
        ranking = rank_mirrors([slow, dead], ROW, TARGET, budget=5.0)
        took = time.monotonic() - start
    finally:
        hole.close()
    by = {m.url: m for m in ranking.mirrors}
    assert by[slow].status == "slow" and "DNS took 2.5 s" in by[slow].detail, by[slow]
    assert ranking.chosen == slow and ranking.sample
    assert by[dead].status == "timeout" and "connected, but no pages" in by[dead].detail
    assert took <= 5.0 + 0.3, took


USER_PIP_CONF = """# the user's own settings: every line but the index must survive an --apply
[global]
timeout = 60
index-url = https://old.invalid/simple
trusted-host = old.invalid
retries = 7
; cert for the corporate proxy
cert = /etc/ssl/corp.pem

[install]
no-compile = true
progress-bar = off
"""


def test_apply_edits_a_pip_conf_with_six_other_settings_and_keeps_them(cli, farm, tmp_path: Path) -> None:
    """The real command: only index-url changes; timeout, trusted-host, retries, cert, [install]'s no-compile and
    progress-bar, the comments and the blank line stay, in order. uv.toml likewise keeps its other keys."""
    import configparser
    import venv as venv_module

    venv = tmp_path / "venv"
    venv_module.create(venv, with_pip=False)
    (venv / "pip.conf").write_text(USER_PIP_CONF)
    (venv / "uv.toml").write_text(
        '# mine\nnative-tls = true\nindex-url = "https://old.invalid/simple"\n\n[pip]\ncompile-bytecode = true\n'
    )
    proc = cli(
        "mirrors",
        "--cann",
        "9.1.0",
        "--only",
        "--candidate",
        farm.url("fast"),
        "--apply",
        "--venv",
        str(venv),
        "--workdir",
        str(tmp_path / "wd"),
    )
    assert proc.returncode == 0, proc.stderr
    written = (venv / "pip.conf").read_text()
    assert written == USER_PIP_CONF.replace("https://old.invalid/simple", farm.url("fast"))
    parsed = configparser.RawConfigParser()
    parsed.read_string(written)
    kept = {(s, k): parsed.get(s, k) for s in parsed.sections() for k in parsed.options(s) if k != "index-url"}
    assert kept == {
        ("global", "timeout"): "60",
        ("global", "trusted-host"): "old.invalid",
        ("global", "retries"): "7",
        ("global", "cert"): "/etc/ssl/corp.pem",
        ("install", "no-compile"): "true",
        ("install", "progress-bar"): "off",
    }
    uv = (venv / "uv.toml").read_text()
    assert uv == f'# mine\nnative-tls = true\nindex-url = "{farm.url("fast")}"\n\n[pip]\ncompile-bytecode = true\n'


def test_edit_pip_conf_sets_extras_and_command_sections_and_keeps_the_rest() -> None:
    from ascend_setup.mirrors.apply import edit_pip_conf, edit_uv_toml

    text = (
        "[global]\nextra-index-url =\n    https://a.invalid/simple\n    https://b.invalid/simple\ntimeout = 5\n"
        "[download]\nindex_url = https://d.invalid/simple\nno-deps = true\n"
    )
    assert edit_pip_conf(text, "https://new.invalid/", None) == (
        "[global]\nextra-index-url =\n    https://a.invalid/simple\n    https://b.invalid/simple\ntimeout = 5\n"
        "index-url = https://new.invalid/\n[download]\nindex-url = https://new.invalid/\nno-deps = true\n"
    )
    assert edit_pip_conf(text, "https://new.invalid/", ["https://x.invalid/"]) == (
        "[global]\nindex-url = https://new.invalid/\nextra-index-url =\n    https://x.invalid/\ntimeout = 5\n"
        "[download]\nindex-url = https://new.invalid/\nextra-index-url =\n    https://x.invalid/\nno-deps = true\n"
    )
    assert (
        edit_pip_conf("# only a comment", "https://n.invalid/", None)
        == "# only a comment\n[global]\nindex-url = https://n.invalid/\n"
    )
    toml = 'extra-index-url = [\n  "https://a.invalid/",\n]\nindex-url = "x"\n[pip]\nindex-url = "keep"\n'
    assert edit_uv_toml(toml, "https://n.invalid/", ["https://e.invalid/"]) == (
        'index-url = "https://n.invalid/"\nextra-index-url = ["https://e.invalid/"]\n'
        'index-strategy = "unsafe-best-match"\n[pip]\nindex-url = "keep"\n'
    )


def test_apply_global_with_venv_is_exit_2_with_json(cli, tmp_path: Path) -> None:
    proc = cli(
        "mirrors",
        "--only",
        "--candidate",
        "http://127.0.0.1:9/simple/",
        "--apply",
        "--global",
        "--venv",
        str(tmp_path),
        "--json",
    )
    line = assert_one_line_error(proc)
    assert "--global and --venv" in line
    assert json.loads(proc.stdout)["exit"] == 2


def test_apply_global_keeps_the_users_other_settings(cli, farm, home: Path, tmp_path: Path) -> None:
    conf = home / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text(USER_PIP_CONF)
    proc = cli(
        "mirrors",
        "--cann",
        "9.1.0",
        "--only",
        "--candidate",
        farm.url("fast"),
        "--apply",
        "--global",
        "--workdir",
        str(tmp_path),
        env={"PIP_CONFIG_FILE": ""},
    )
    assert proc.returncode == 0, proc.stderr
    assert conf.read_text() == USER_PIP_CONF.replace("https://old.invalid/simple", farm.url("fast"))


def test_a_resolver_that_drops_repeated_lookups_does_not_drop_the_index(farm, monkeypatch) -> None:
    """A resolver that answers a name at once the first time and only at its 3 s retry afterwards (it drops
    part of a burst): the ranking's page fetches reuse its first answer, so the index is ranked ok within a
    2 s budget. Each page used to resolve the name again, and pypi.org was dropped as a timeout."""
    import socket

    real = socket.getaddrinfo
    asked = []

    def resolver(host, *args, **kwargs):
        if host == "burst-dns.test":
            if asked:
                time.sleep(3)
            asked.append(host)
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    url = farm.url("fast").replace("127.0.0.1", "burst-dns.test")
    start = time.monotonic()
    ranking = rank_mirrors([url], ROW, TARGET, budget=2.0)
    took = time.monotonic() - start
    (result,) = ranking.mirrors
    assert result.status == "ok" and ranking.chosen == url, result
    assert asked == ["burst-dns.test"] and took <= 2.0 + 0.3, (asked, took)


def test_the_ranking_cache_makes_no_directory_above_the_workdir(tmp_path: Path) -> None:
    """With HOME unset a read command's default workdir is /mnt/workspace/ascend-setup even where there is no
    /mnt/workspace: keeping the ranking there made /mnt/workspace, a directory nobody asked for."""
    from ascend_setup.mirrors.choice import CACHE_NAME, save_cache

    save_cache(tmp_path / "missing" / "ascend-setup", {"result": {"chosen": "http://127.0.0.1:9/simple/"}})
    assert not (tmp_path / "missing").exists()
    save_cache(tmp_path / "ascend-setup", {"result": {"chosen": "http://127.0.0.1:9/simple/"}})
    assert (tmp_path / "ascend-setup" / CACHE_NAME).is_file()


def _one_mirror(tmp_path: Path, behaviour: Behaviour):
    """A fresh mirror serving the row's pins, shaped by `behaviour`; the sample (torch-npu) is 4 MiB."""
    from helpers.mirror_farm import build_files

    server = LocalIndex(behaviour)
    server.add_dir(build_files(tmp_path, gated_packages(ROW), platform.machine()))
    return server


def test_throughput_is_measured_over_as_many_connections_as_the_install_opens(tmp_path: Path) -> None:
    """A mirror that caps each connection at 500 kB/s: one connection would measure 500 kB/s, the install's
    PER_HOST connections fill that many times more, and the ranking reports what they fill."""
    from ascend_setup.index.download import PER_HOST
    from ascend_setup.mirrors import rank

    assert rank.CONNECTIONS == PER_HOST >= 3
    server = _one_mirror(tmp_path, Behaviour(bytes_per_second=500_000))
    try:
        ranking = rank_mirrors([server.url], ROW, TARGET, budget=4.0)
        (measured,) = ranking.mirrors
        assert measured.status == "ok", measured
        assert measured.throughput_bps > 0.7 * PER_HOST * 500_000, measured  # one connection: <= 500 kB/s
        starts = sorted(
            int(h["Range"][6:].split("-")[0])
            for p, h in server.requests
            if "/files/torch_npu" in p and h.get("Range", "") != "bytes=0-0"
        )
        assert len(starts) == PER_HOST and len(set(starts)) == PER_HOST, starts  # each its own part of the sample
    finally:
        server.close()


def test_throughput_over_several_connections_reports_the_line_not_their_sum(tmp_path: Path) -> None:
    """A mirror whose line (all its connections together) sends 800 kB/s: more connections fill no more."""
    server = _one_mirror(tmp_path, Behaviour(line_bytes_per_second=800_000))
    try:
        (measured,) = rank_mirrors([server.url], ROW, TARGET, budget=4.0).mirrors
        assert measured.status == "ok", measured
        assert 0.5 * 800_000 < measured.throughput_bps < 1.3 * 800_000, measured
    finally:
        server.close()
