"""The one rule for "the same version": the local part counts, except when asking which release it is."""

from __future__ import annotations

from packaging.version import Version

from ascend_setup.dists.versions import local_only_differs, same_release, same_version


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
