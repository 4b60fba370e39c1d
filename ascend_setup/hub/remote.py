"""fit on a hub id: the small files and every safetensors header, read by HTTP range requests, cached by
revision so a second fit of the same id is offline. Weights are never downloaded.

The cache (<cache>/hub/<source>/<owner>--<name>/): refs/<revision> names the commit it resolved to, and
<commit>/ holds config.json, the index, the quant description and headers.json ({shard: {size, header}})
with the listing. A commit's directory is complete before its ref is written, so a stop leaves no half.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from pydantic import BaseModel, ConfigDict, Field

from ascend_setup.errors import AscendSetupError
from ascend_setup.fit.config import check_config, complete_from_headers
from ascend_setup.fit.model_files import CONFIG, INDEX, QUANT, ModelFiles, Shard, read_small_json, shard_names
from ascend_setup.fit.safetensors import header_length, parse_header
from ascend_setup.hub.base import SOURCES, HubNotFound, HubUnreachable, Listing, read_range, read_small
from ascend_setup.hub.huggingface import HuggingFace
from ascend_setup.hub.modelscope import ModelScope
from ascend_setup.index.http import TLS_HINT
from ascend_setup.utils.files import atomic_write_text
from ascend_setup.utils.inputs import Name, PathText, RelativePath, load_model, parse_json

HEADERS = "headers.json"
#: Files in one model repository, shards of one model: far above any real one.
MAX_FILES = 100_000


class _Cached(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class CachedFile(_Cached):
    path: RelativePath  # joined to the model's folder by model fetch
    size: int = Field(ge=0, le=1 << 50)
    sha256: Optional[Name] = None


class CachedListing(_Cached):
    source: Name
    endpoint: PathText
    repo: Name
    revision: Name
    commit: Name
    files: List[CachedFile] = Field(default_factory=list, max_length=MAX_FILES)


class CachedShard(_Cached):
    size: int = Field(ge=0, le=1 << 50)
    header: Dict[str, Any]  # checked against its shard (parse_header) before it was cached


class CachedHeaders(_Cached):
    """headers.json as _read_into_cache writes it. The cache is ours, but a disk, a copy or a hand can damage
    it: a damaged one is bad input naming the file, not a KeyError."""

    listing: CachedListing
    shards: Dict[PathText, CachedShard] = Field(max_length=MAX_FILES)


#: The hubs a model id is looked up on.
Hub = Union[HuggingFace, ModelScope]


def client(source: str, endpoint_url: Optional[str] = None) -> Hub:
    return ModelScope(endpoint_url) if source == "modelscope" else HuggingFace(endpoint_url)


def _repo_dir(cache: Path, source: str, repo: str) -> Path:
    return cache / "hub" / source / repo.replace("/", "--")


def _cached(cache: Path, source: str, repo: str, revision: Optional[str]) -> Optional[Path]:
    rev = revision or client(source).default_revision
    ref = _repo_dir(cache, source, repo) / "refs" / rev.replace("/", "--")
    if not ref.is_file():
        return None
    commit_dir = _repo_dir(cache, source, repo) / ref.read_text().strip()
    return commit_dir if (commit_dir / HEADERS).is_file() else None


def locate(
    repo: str, *, source: Optional[str], revision: Optional[str], endpoint_url: Optional[str], cache: Path
) -> Tuple[Hub, Listing]:
    """The hub that has the model (ModelScope first, then Hugging Face, unless --source) and its listing."""
    reasons: List[str] = []
    not_found = True
    untrusted = False
    for name in [source] if source else list(SOURCES):
        hub = client(name, endpoint_url)
        try:
            return hub, hub.listing(repo, revision)
        except HubNotFound as exc:
            reasons.append(exc.message)
        except HubUnreachable as exc:
            reasons.append(exc.message)
            not_found = False
            untrusted = untrusted or exc.hint == TLS_HINT
    error = HubNotFound if not_found else AscendSetupError
    # A certificate the CA set does not trust is fixed by trusting its CA, not by another id or mirror.
    raise error(
        f"{repo}: " + "; ".join(reasons),
        hint=TLS_HINT
        if untrusted
        else "check the id and --revision, set MODELSCOPE_DOMAIN / HF_ENDPOINT to "
        "a reachable mirror, or give a local model directory",
    )


def remote_files(
    repo: str,
    *,
    source: Optional[str],
    revision: Optional[str],
    endpoint_url: Optional[str],
    cache: Path,
    refresh: bool = False,
) -> Tuple[ModelFiles, Listing]:
    """The model's files and listing: from the cache when this revision was read before, else from the hub
    (a cache entry that cannot be read is read again from the hub)."""
    if not refresh:
        for name in [source] if source else list(SOURCES):
            found = _cached(cache, name, repo, revision)
            if found:
                try:
                    return _from_cache(found, repo, cached=True)
                except (OSError, ValueError, KeyError, TypeError):
                    pass
    hub, listing = locate(repo, source=source, revision=revision, endpoint_url=endpoint_url, cache=cache)
    return _from_cache(_read_into_cache(hub, listing, cache), repo, cached=False)


def safetensors_shards(listing: Listing, index: Any) -> List[str]:
    """The shards to read: those the index names, else the top-level *.safetensors files."""
    if index is not None:
        return shard_names(index, f"{listing.repo}'s {INDEX}")
    return sorted(f.path for f in listing.files if fnmatch.fnmatch(f.path, "*.safetensors") and "/" not in f.path)


def _read_into_cache(hub: Hub, listing: Listing, cache: Path) -> Path:
    what = f"{listing.source} {listing.repo}@{listing.commit[:12]}"
    if listing.get(CONFIG) is None:
        raise HubNotFound(f"{what} has no config.json: not a transformers model fit can read")
    target = _repo_dir(cache, listing.source, listing.repo) / listing.commit
    target.mkdir(parents=True, exist_ok=True)
    small: Dict[str, str] = {}
    for name in (CONFIG, INDEX, QUANT):
        if listing.get(name) is not None:
            small[name] = read_small(hub.url(listing, name), what=f"{what} {name}")
    check_config(parse_json(small[CONFIG], f"{what} {CONFIG}"), f"{what} {CONFIG}", headers_follow=True)
    index = parse_json(small[INDEX], f"{what} {INDEX}") if INDEX in small else None
    names = safetensors_shards(listing, index)
    missing = [n for n in names if listing.get(n) is None]
    if missing:
        raise HubNotFound(
            f"{what}: its index names {len(names)} shards, {len(missing)} are not in the repository ({missing[0]})"
        )
    headers: Dict[str, Dict[str, Any]] = {}
    for name in names:
        listed = listing.get(name)
        assert listed is not None  # every shard is listed: the missing ones were refused above
        size = listed.size
        url = hub.url(listing, name)
        length = header_length(f"{what} {name}", read_range(url, 0, 8, what=name), size)
        blob = read_range(url, 8, length, what=name)
        headers[name] = {"size": size, "header": parse_header(f"{what} {name}", blob, size)}
    for name, text in small.items():
        atomic_write_text(target / name, text)
    atomic_write_text(target / HEADERS, json.dumps({"listing": listing.to_json(), "shards": headers}))
    refs = target.parent / "refs"
    refs.mkdir(exist_ok=True)
    atomic_write_text(refs / listing.revision.replace("/", "--"), listing.commit + "\n")
    return target


def _from_cache(directory: Path, repo: str, *, cached: bool) -> Tuple[ModelFiles, Listing]:
    data = load_model(
        directory / HEADERS, "hub-cache", CachedHeaders, hint=f"remove {directory}: fit reads the hub again"
    )
    listing = Listing.from_json(data.listing.model_dump())
    raw = check_config(read_small_json(directory / CONFIG, "hub cache"), f"cached {CONFIG}", headers_follow=True)
    shards = [Shard(n, s.size, s.header) for n, s in data.shards.items()]
    config, filled = complete_from_headers(raw, [s.header for s in shards])
    check_config(config, f"cached {CONFIG}", headers_read=bool(shards))
    origin = (
        f"{listing.source} {listing.endpoint} {repo}@{listing.revision} (commit {listing.commit[:12]}): "
        f"config.json"
        + (f", {len(shards)} safetensors headers by range requests" if shards else "")
        + (f" ({', '.join(filled)} from the headers' tensor shapes)" if filled else "")
        + (f"; cached in {directory}" if cached else "; now cached")
    )
    files = ModelFiles(
        repo, config, shards, (directory / QUANT).is_file(), origin, has_index=(directory / INDEX).is_file()
    )
    return files, listing
