"""Fixtures of the end-to-end tier: a simulated host per module, with the stub plugin as sdist or wheel."""

from __future__ import annotations

import pytest
from helpers.stack import _stack

from ascend_setup.host.machine import glibc_version


@pytest.fixture(scope="module")
def source_stack(tmp_path_factory):
    """vllm-ascend has no wheel for this host: the install must build it from the sdist."""
    stack = _stack(tmp_path_factory)
    yield stack
    stack.close()


@pytest.fixture(scope="module")
def wheel_stack(tmp_path_factory):
    """vllm-ascend has a wheel for this host (at this host's own glibc, whatever it is): the install must
    take it, no build."""
    stack = _stack(tmp_path_factory, plugin_wheel_arches=("x86_64", "aarch64"), plugin_wheel_glibc=glibc_version())
    yield stack
    stack.close()
