"""An oracle operator's path as docs/operations.md tells it ("Deploying the contracts ... and
funding the oracle"), on the local devnet instead of preprod: `proofnet chain keygen` and
`proofnet oracle keygen` with the docs' relative paths (`keys/...`), fund both addresses,
mint test NTX, `proofnet chain deploy ... --out deployment.json`, then `proofnet oracle serve
--key-file keys/oracle1.skey` with settlement on and `PROOFNET_SETTLEMENT_DEPLOYMENT_FILE`
naming the relative `deployment.json` (tests/roles/role_support.py::stand_up_network). Every
step is the documented command line run as a child process in the operator's directory; only
the values the docs leave to the reader (key hashes, addresses, the policy id) are taken from
what the commands printed."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from role_support import Network, devnet_shell, stand_up_network

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    with devnet_shell(tmp_path_factory.mktemp("oracle-operator")) as (shell, devnet_url):
        yield stand_up_network(shell, devnet_url)


def test_keygen_to_deploy_to_a_serving_oracle(network: Network) -> None:
    keys = network.root.cwd / "operator" / "keys"
    assert (keys / "oracle1.skey").stat().st_mode & 0o077 == 0
    assert (keys / "admin.skey").stat().st_mode & 0o077 == 0
    # The quorum identity the oracle serves is the key hash `oracle keygen` printed and
    # `chain deploy --oracle` put in the oracle config on chain.
    identity = httpx.get(f"{network.oracle_url}/api/v1/quorum/identity", timeout=10)
    assert identity.status_code == 200, identity.text
    assert network.oracle_hash in identity.text
    # The oracle and the API publish the deployment the operator wrote, read through the
    # relative PROOFNET_SETTLEMENT_DEPLOYMENT_FILE.
    written = json.loads(network.deployment_file.read_text())
    for url in (network.oracle_url, network.api_url):
        published = httpx.get(f"{url}/api/v1/deployment", timeout=10)
        assert published.status_code == 200, published.text
        assert published.json() == written
