"""The tool's HTTP trusts what pip trusts: the system's store (SSL_CERT_FILE included) and pip's cert."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from helpers.cli import REPO, clean_env
from helpers.tls import make_site_ca

from ascend_setup.simulate.dists import build_wheel
from ascend_setup.simulate.index_server import LocalIndex

#: What the OS's userland (glibc, the Python build, venv, the trust store, the toolchain, the disk) can
#: change: the glibc 2.31 root runs this file too.
pytestmark = pytest.mark.userland

ASK = """
import sys
from ascend_setup.index.http import IndexUnreachable, get
from ascend_setup.index.pipconfig import network_settings_for_this_run, pip_settings

network_settings_for_this_run(pip_settings())
try:
    print("OK", get(sys.argv[1], attempts=1, timeout=10).status_code)
except IndexUnreachable as exc:
    print("ERR", exc.message, "|", exc.hint)
"""


@pytest.fixture(scope="module")
def https_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("tls")
    site = make_site_ca(root / "ca")
    index = LocalIndex(tls=(site.cert, site.key))
    index.add(build_wheel(root / "files", "alpha", "1.0"))
    yield index, site
    index.close()


def _ask(url: str, tmp_path: Path, **extra: str) -> str:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PIP_")
        and k not in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
    }
    env.update({"PYTHONPATH": str(REPO), "HOME": str(tmp_path), "PIP_CONFIG_FILE": os.devnull, **extra})
    return subprocess.run(
        [sys.executable, "-c", ASK, url], capture_output=True, text=True, env=env, timeout=60
    ).stdout.strip()


def test_an_untrusted_site_ca_is_named_with_the_fix(https_index, tmp_path: Path) -> None:
    index, _ = https_index
    out = _ask(index.url + "alpha/", tmp_path)
    assert out.startswith("ERR") and "certificate is not trusted" in out, out
    assert "pip config set global.cert" in out and "update-ca-certificates" in out


def test_the_system_trust_and_pips_cert_are_honoured(https_index, tmp_path: Path) -> None:
    index, site = https_index
    assert _ask(index.url + "alpha/", tmp_path, SSL_CERT_FILE=str(site.ca)) == "OK 200"
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\ncert = {site.ca}\n")
    assert _ask(index.url + "alpha/", tmp_path, PIP_CONFIG_FILE=str(config)) == "OK 200"


MANY = """
import sys, threading
from ascend_setup.index.http import IndexUnreachable, get
from ascend_setup.index.pipconfig import network_settings_for_this_run, pip_settings
network_settings_for_this_run(pip_settings())
results = []
def ask():
    try:
        results.append(get(sys.argv[1], attempts=1, timeout=20).status_code)
    except Exception as exc:
        results.append(repr(exc)[:200])
threads = [threading.Thread(target=ask) for _ in range(32)]
[t.start() for t in threads]
[t.join() for t in threads]
print(sorted(set(map(str, results))))
"""


def test_threads_that_open_sessions_at_once_all_get_through(https_index, tmp_path: Path) -> None:
    """The gate opens a session per thread, all at once; the system trust is put in place once, before any
    of them makes an SSL context (a race here recursed in ssl and passed for an index that did not answer)."""
    index, site = https_index
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        {"PYTHONPATH": str(REPO), "HOME": str(tmp_path), "PIP_CONFIG_FILE": os.devnull, "SSL_CERT_FILE": str(site.ca)}
    )
    for _ in range(4):
        out = subprocess.run(
            [sys.executable, "-c", MANY, index.url + "alpha/"], capture_output=True, text=True, env=env, timeout=120
        )
        assert out.stdout.strip() == "['200']", out.stdout + out.stderr[-2000:]


SYSTEM_ONLY = """
import sys
from ascend_setup.index.http import IndexUnreachable, get
from ascend_setup.index.trust import system_ca
try:
    print("OK", get(sys.argv[1], attempts=1, timeout=10).status_code, system_ca())
except IndexUnreachable as exc:
    print("ERR", exc.message)
"""


def _python_3_9_with_the_http_deps() -> Optional[str]:
    """A Python 3.9 that can import requests and tenacity already: Debian 11's python3 with its own
    python3-requests and python3-tenacity in the glibc 2.31 root, as a user there has them."""
    from ascend_setup.host.interpreters import find_interpreters

    for interp in find_interpreters():
        if (
            interp.version.startswith("3.9.")
            and subprocess.run([interp.path, "-c", "import requests, tenacity"], capture_output=True).returncode == 0
        ):
            return interp.path
    return None


def _with_the_site_ca_in_the_system_store(
    site_ca: Path, tmp_path: Path, argv: List[str], env: Dict[str, str]
) -> subprocess.CompletedProcess:
    """Run `argv` with `site_ca` added to the system's bundle: a copy of it plus the CA, bind-mounted over
    /etc/ssl/certs/ca-certificates.crt in a private mount namespace, so the host's file is untouched."""
    import shutil

    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs unshare and root (a private mount namespace)")
    system = Path("/etc/ssl/certs/ca-certificates.crt")
    bundle = tmp_path / "ca-certificates.crt"
    bundle.write_text((system.read_text() if system.is_file() else "") + site_ca.read_text())

    def in_own_mounts(propagation: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                "unshare",
                "--mount",
                "--propagation",
                propagation,
                "sh",
                "-c",
                f'mkdir -p /etc/ssl/certs && touch {system} && mount --bind "$0" {system} && exec "$@"',
                str(bundle),
                *argv,
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )

    # In a chroot (the glibc 2.31 root) '/' is no mount point and its propagation cannot be set: there every
    # mount must be private already.
    mounted = in_own_mounts("private")
    if mounted.returncode != 0 and "unshare failed" in mounted.stderr:
        # a container build without CAP_SYS_ADMIN (docker build of Dockerfile.test): no namespace of our own
        pytest.skip(f"no private mount namespace here: {mounted.stderr.strip()}")
    if mounted.returncode != 0 and "propagation" in mounted.stderr:
        if "shared:" in Path("/proc/self/mountinfo").read_text():
            pytest.skip("a chroot whose mounts are shared: a bind mount here would reach the host")
        mounted = in_own_mounts("unchanged")
    return mounted


def _without_a_ca_setting(env: Dict[str, str]) -> Dict[str, str]:
    return {
        k: v
        for k, v in env.items()
        if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
    }


def test_python_3_9_without_truststore_trusts_the_system_store(https_index, tmp_path: Path) -> None:
    """Python 3.9 has no truststore, and requests alone trusts certifi: a site CA that only the system's
    bundle holds must still be trusted, as pip trusts it there. The glibc 2.31 root runs it on Debian 11's own
    python3 (3.9), the users' generation."""
    python39 = _python_3_9_with_the_http_deps()
    if python39 is None:
        pytest.skip("needs a python3.9 with requests and tenacity (the glibc 2.31 root has one)")
    index, site = https_index
    env = _without_a_ca_setting({k: v for k, v in os.environ.items() if not k.startswith("PIP_")})
    env.update({"PYTHONPATH": str(REPO), "HOME": str(tmp_path)})
    ask = [python39, "-c", SYSTEM_ONLY, index.url + "alpha/"]
    bare = subprocess.run(ask, capture_output=True, text=True, env=env, timeout=60).stdout.strip()
    assert bare.startswith("ERR") and "not trusted" in bare, bare  # the host's store lacks the site CA
    mounted = _with_the_site_ca_in_the_system_store(site.ca, tmp_path, ask, env)
    assert mounted.stdout.strip().startswith("OK 200"), (mounted.stdout, mounted.stderr[-2000:])


def test_plan_trusts_the_system_store_in_uv_too(indexes, https_index, home: Path, tmp_path: Path) -> None:
    """Issue 40: a site CA only the system store holds, no SSL_CERT_FILE, no pip cert. plan reads the pages
    with the tool's client and resolves with uv (a fresh uv cache, so uv asks the index itself): uv, which
    trusts its own roots unless told, is handed the same decision (its system-certificates switch)."""
    *_, eco = indexes
    _, site = https_index
    servers = [LocalIndex(tls=(site.cert, site.key)) for _ in range(3)]
    try:
        for server, folder in zip(servers, (eco.main, eco.ascend, eco.pytorch_cpu)):
            server.add_dir(folder)
        main, ascend, torch_cpu = servers
        argv = [
            sys.executable,
            "-m",
            "ascend_setup",
            "plan",
            "--cann",
            "9.1.0",
            "--glibc",
            "2.31",
            "--arch",
            "aarch64",
            "--python",
            "3.11",
            "--index-url",
            main.url,
            "--index",
            f"ascend={ascend.url}",
            "--index",
            f"pytorch-cpu={torch_cpu.url}",
            "--json",
        ]
        env = _without_a_ca_setting(clean_env(home))
        proc = _with_the_site_ca_in_the_system_store(site.ca, tmp_path, argv, env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        packages = {p["name"]: p for p in json.loads(proc.stdout)["packages"]}
        assert packages["triton-ascend"]["index_url"] == ascend.url and packages["torch"]["version"]
        uv_asked = [path for path, headers in main.requests if headers.get("User-Agent", "").startswith("uv/")]
        assert uv_asked, "uv read nothing from the index: the test would not show that uv trusts the CA"
    finally:
        for server in servers:
            server.close()


def test_uv_is_told_by_the_switch_its_version_reads(tmp_path: Path) -> None:
    """The system store: UV_SYSTEM_CERTS from uv 0.11, UV_NATIVE_TLS before it. pip's cert: the same file to
    pip (PIP_CERT) and uv (SSL_CERT_FILE)."""
    from ascend_setup.index.trust import Trust, decide_trust, system_ca

    def fake_uv(version: str) -> List[str]:
        script = tmp_path / f"uv-{version}"
        script.write_text(f"#!/bin/sh\necho 'uv {version} (x86_64-unknown-linux-gnu)'\n")
        script.chmod(0o755)
        return [str(script)]

    assert decide_trust({}) == Trust(system=True)  # this host has a system store
    assert Trust(system=True).uv_env(fake_uv("0.13.9")) == {"UV_SYSTEM_CERTS": "1"}
    assert Trust(system=True).uv_env(fake_uv("0.10.12")) == {"UV_NATIVE_TLS": "1"}
    assert Trust(system=True).pip_env() == {"PIP_CERT": system_ca()} and Trust().uv_env(fake_uv("0.13.9")) == {}
    ca = tmp_path / "site-ca.pem"
    ca.write_text("")
    chosen = decide_trust({"cert": str(ca), "timeout": "30"})
    assert chosen.uv_env(fake_uv("0.13.9")) == {"SSL_CERT_FILE": str(ca)} and chosen.pip_env() == {"PIP_CERT": str(ca)}


# --- every command that reaches the network, against a world whose every server a site CA signed -----------------
# Issue 40: the CA is in the system store only (a bind-mounted copy of the bundle, as above), no SSL_CERT_FILE, no
# pip cert. Each command passes there, and fails with the TLS hint where the store lacks the CA (the host's own).

UNTRUSTED = "its certificate is not trusted"


@pytest.fixture(scope="module")
def tls_stack(https_index, tmp_path_factory):
    """The simulated host with the plugin's wheel for this host (the install takes it: no source build), the
    tool's own dependencies for `bundle`, and every server (the three indexes, the tool's, the build archives')
    on HTTPS with a certificate of the site CA."""
    from helpers.stack import _stack

    from ascend_setup.host.machine import glibc_version

    _, site = https_index
    stack = _stack(
        tmp_path_factory,
        plugin_wheel_arches=("x86_64", "aarch64"),
        plugin_wheel_glibc=glibc_version(),
        tool_dependencies=True,
        tls=(site.cert, site.key),
    )
    yield stack, site
    stack.close()


def _untrusted(argv: List[str], env: Dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)


def _assert_tls_hint(proc: subprocess.CompletedProcess) -> None:
    """Refused for the certificate, with the fix: the hint names both ways to trust the CA."""
    from ascend_setup.index.http import TLS_HINT

    said = " ".join((proc.stdout + proc.stderr).split())  # a terminal-width wrap does not count
    assert proc.returncode != 0 and UNTRUSTED in said and TLS_HINT in said, (proc.stdout[-2000:], proc.stderr[-2000:])


def _agents(*servers: LocalIndex) -> set:
    """The clients (by User-Agent) that asked these servers for anything."""
    return {headers.get("User-Agent", "").split("/")[0] for server in servers for _, headers in server.requests}


def test_install_trusts_the_system_store_in_every_client(tls_stack, tmp_path: Path) -> None:
    """The one full install of this file: the gate and the downloads (the tool's HTTP), the resolution (uv) and
    the installs (pip, chosen so that all three clients ask the indexes: the venv's pip is ensurepip's, which may
    predate pip's own use of the system store), against HTTPS indexes whose CA only the system store holds."""
    from helpers.stack import installed, lock_versions

    stack, site = tls_stack
    env = _without_a_ca_setting(stack.env())
    _assert_tls_hint(_untrusted(stack.install_argv(tmp_path / "refused"), env))
    for server in (stack.main, stack.ascend, stack.pytorch_cpu):
        server.requests.clear()
    argv = stack.install_argv(tmp_path / "wd", "--installer", "pip")
    proc = _with_the_site_ca_in_the_system_store(site.ca, tmp_path, argv, env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert installed(tmp_path / "wd" / "venv") == lock_versions(tmp_path / "wd")
    asked = _agents(stack.main, stack.ascend, stack.pytorch_cpu)
    # The install fetches the lock's files itself and pip installs those: pip asks an index when it repairs.
    assert {"ascend-setup", "uv"} <= asked, asked
    _repair_from_the_index(tmp_path / "wd")
    for server in (stack.main, stack.ascend, stack.pytorch_cpu):
        server.requests.clear()
    again = _with_the_site_ca_in_the_system_store(site.ca, tmp_path, argv, env)
    assert again.returncode == 0, again.stderr[-4000:]
    assert "--force-reinstall" in (tmp_path / "wd" / "logs" / "torch-stack.log").read_text()
    assert "pip" in _agents(stack.main, stack.ascend, stack.pytorch_cpu)  # pip itself reached the HTTPS index


def _repair_from_the_index(workdir: Path) -> None:
    """What a kill mid-step leaves: a file of torch cut short, its step recorded started. The rerun reinstalls
    it from the index with --force-reinstall (a repair never takes the fetched files)."""
    import csv

    from ascend_setup.dists.venv_reader import site_packages
    from ascend_setup.engine.workdir import Workdir
    from ascend_setup.steps.install_session import install_store

    (site,) = site_packages(workdir / "venv")
    (info,) = [p for p in site.glob("torch-*.dist-info")]
    rows = [
        r
        for r in csv.reader((info / "RECORD").read_text().splitlines())
        if len(r) > 2 and r[2].isdigit() and int(r[2]) >= 10 and ".dist-info/" not in r[0] and "../" not in r[0]
    ]
    victim = site / rows[0][0]
    victim.write_bytes(victim.read_bytes()[: len(victim.read_bytes()) // 3])
    store = install_store(Workdir(workdir))
    state = store.load()
    store.mark(
        state, "torch-stack", state.steps["torch-stack"].model_copy(update={"state": "started", "ended_at": None})
    )


def test_bundle_trusts_the_system_store(tls_stack, tmp_path: Path) -> None:
    import platform

    from ascend_setup.host.machine import glibc_version

    stack, site = tls_stack
    argv = [
        sys.executable,
        "-m",
        "ascend_setup",
        "bundle",
        "--cann",
        "9.1.0",
        "--arch",
        platform.machine(),
        "--glibc",
        glibc_version() or "",
        "--python",
        "%d.%d" % sys.version_info[:2],
        *stack.index_args(),
        "--tool-index-url",
        stack.host.tools.url,
    ]
    env = _without_a_ca_setting(stack.env())
    _assert_tls_hint(_untrusted([*argv, "-o", str(tmp_path / "refused")], env))
    proc = _with_the_site_ca_in_the_system_store(site.ca, tmp_path, [*argv, "-o", str(tmp_path / "bundle")], env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert manifest["missing"] == [] and any(f["role"] == "tool-dependency" for f in manifest["files"])


def test_mirrors_trusts_the_system_store(tls_stack, tmp_path: Path) -> None:
    from ascend_setup.index.http import TLS_HINT

    stack, site = tls_stack
    argv = [
        sys.executable,
        "-m",
        "ascend_setup",
        "mirrors",
        "--cann",
        "9.1.0",
        "--only",
        "--candidate",
        stack.main.url,
        "--workdir",
        str(tmp_path / "wd"),
        "--json",
        "--budget",
        "20",
    ]
    env = _without_a_ca_setting(stack.env())
    refused = _untrusted(argv, env)
    assert refused.returncode == 1, refused.stderr[-2000:]
    data = json.loads(refused.stdout)
    assert data["chosen"] is None and UNTRUSTED in data["mirrors"][0]["detail"] and data["hint"] == TLS_HINT, data
    proc = _with_the_site_ca_in_the_system_store(site.ca, tmp_path, argv, env)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    data = json.loads(proc.stdout)
    assert data["chosen"] == stack.main.url and "hint" not in data, data


@pytest.fixture(scope="module")
def tls_hub(https_index, tmp_path_factory):
    from helpers.hub_server import LocalHub
    from helpers.models import make_model

    _, site = https_index
    config = {
        "model_type": "qwen3",
        "hidden_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "intermediate_size": 512,
        "vocab_size": 1024,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    shards = {"model.safetensors": {"model.embed_tokens.weight": ("BF16", 256 * 1024)}}
    model = make_model(tmp_path_factory.mktemp("tls-model") / "tiny", config, shards)
    hub = LocalHub({"Qwen/Tiny": model}, tls=(site.cert, site.key))
    yield hub, site, model
    hub.close()


def _fetch(hub, source: str, tmp_path: Path, name: str) -> List[str]:
    return [
        sys.executable,
        "-m",
        "ascend_setup",
        "model",
        "fetch",
        "Qwen/Tiny",
        "--source",
        source,
        "--to",
        str(tmp_path / name),
        "--card",
        "910B3",
        "--json",
    ]


def _hub_env(hub, home: Path, tmp_path: Path, **extra: str) -> Dict[str, str]:
    return _without_a_ca_setting(
        clean_env(
            home,
            {"XDG_CACHE_HOME": str(tmp_path / "cache"), "MODELSCOPE_DOMAIN": hub.url, "HF_ENDPOINT": hub.url, **extra},
        )
    )


@pytest.mark.parametrize("source", ["huggingface", "modelscope"])
def test_model_fetch_trusts_the_system_store(tls_hub, source: str, home: Path, tmp_path: Path) -> None:
    """The listing (huggingface_hub's own HTTP stack for Hugging Face, ours for ModelScope) and the download
    (ours, through the hub's redirect to its CDN port) trust the same store. Where this Python's OpenSSL default
    is the distribution's bundle, huggingface_hub 2.x would trust it unaided; a Python built with another prefix
    (the glibc 2.31 root's) or huggingface_hub 0.36 (certifi) would not. The next test shows the hand-over on any
    host."""
    hub, site, model = tls_hub
    env = _hub_env(hub, home, tmp_path)
    _assert_tls_hint(_untrusted(_fetch(hub, source, tmp_path, "refused"), env))
    proc = _with_the_site_ca_in_the_system_store(site.ca, tmp_path, _fetch(hub, source, tmp_path, "dl"), env)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert json.loads(proc.stdout)["source"] == source
    assert (tmp_path / "dl" / "model.safetensors").read_bytes() == (model / "model.safetensors").read_bytes()


def test_huggingface_hub_is_handed_pips_cert_too(tls_hub, home: Path, tmp_path: Path) -> None:
    """The decision, not the library's default, is what huggingface_hub trusts: pip's configured cert (which no
    library reads by itself) admits the site CA on any host, whatever the library's own default store."""
    hub, site, _ = tls_hub
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\ncert = {site.ca}\n")
    proc = subprocess.run(
        _fetch(hub, "huggingface", tmp_path, "dl"),
        capture_output=True,
        text=True,
        timeout=300,
        env=_hub_env(hub, home, tmp_path, PIP_CONFIG_FILE=str(config)),
    )
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert json.loads(proc.stdout)["source"] == "huggingface"
