"""A self-signed loopback certificate for the TLS tests (web config, security)."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import require_binary


@pytest.fixture(scope="session")
def cert(tmp_path_factory):
    """A directory with cert.pem and key.pem for CN=localhost, IP 127.0.0.1, valid one day."""
    openssl = require_binary("openssl")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem"), "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return d
