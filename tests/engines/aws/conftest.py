"""A real moto server (the AWS HTTP protocol on 127.0.0.1, a free port) for the boto3 code paths.

boto3 reaches it through AWS_ENDPOINT_URL, the same setting a user would use, with fake credentials; the product
code is not told about moto in any other way.
"""

from __future__ import annotations

import os
import urllib.request

import pytest

from tests.motoserver import Moto

REGION = "us-east-1"


@pytest.fixture(scope="session")
def moto_server():
    m = Moto()
    yield m.url
    m.stop()


@pytest.fixture
def aws(moto_server, monkeypatch):
    """Fresh moto state, and the environment a user would have: endpoint, region, credentials."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_server}/moto-api/reset", method="POST"), timeout=10)
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    return moto_server
