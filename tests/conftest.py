"""Shared fixtures: the synthesized template (synthesized once, cached on disk by content hash)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")


@pytest.fixture(scope="session")
def template():
    from infra.template import synthesized_template

    return synthesized_template()
