"""TlsConfig against a bnn-server serving mutual TLS (certificates made with openssl)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import bnn_serve
from conftest import ServerProcess

MAKE_CERTS = """set -e
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1"; }
key ca.key
openssl req -x509 -new -key ca.key -subj /CN=ca -days 2 -out ca.pem
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext
printf 'extendedKeyUsage=clientAuth\\n' > client.ext
for who in server client; do
  key $who.key
  openssl req -new -key $who.key -subj /CN=$who -out $who.csr
  openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \\
    -extfile $who.ext -out $who.pem
done
"""


@pytest.fixture(scope="module")
def tls_server(server_binary, tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make the test certificates (deploy/install-deps.sh)")
    certs = tmp_path_factory.mktemp("certs")
    subprocess.run(["sh", "-c", MAKE_CERTS], cwd=certs, check=True, capture_output=True)
    process = ServerProcess(server_binary, certs / "data",
                            ["--tls-cert", str(certs / "server.pem"),
                             "--tls-key", str(certs / "server.key"),
                             "--tls-client-ca", str(certs / "ca.pem")])
    yield process.address, certs
    process.stop()


def test_mutual_tls(tls_server):
    address, certs = tls_server
    tls = bnn_serve.TlsConfig(ca=str(certs / "ca.pem"), cert=str(certs / "client.pem"),
                              key=str(certs / "client.key"))
    with bnn_serve.Client(address, tls=tls) as client:
        assert "slang" in [m.name for m in client.methods()]


@pytest.mark.parametrize("tls", [None, "ca-only"])
def test_without_a_client_certificate_the_server_is_unavailable(tls_server, tls):
    address, certs = tls_server
    config = None if tls is None else bnn_serve.TlsConfig(ca=str(certs / "ca.pem"))
    with bnn_serve.Client(address, tls=config, timeout=5) as client:
        with pytest.raises(bnn_serve.UnavailableError):
            client.methods()
