import hashlib
import json
import os
import stat

import pytest
from nacl.signing import SigningKey

from proofnet.messages.address import enterprise_address
from proofnet.messages.binding import (
    BindingError,
    PayoutBinding,
    binding_message,
    verify_payout_binding,
)
from worker.identity import (
    IdentityError,
    bind_payout_address,
    create_key,
    load_key,
    load_or_create_key,
)

NONCE = "0f" * 16


def _address(network="preprod", seed=b"\x01" * 32):
    return enterprise_address(bytes(SigningKey(seed).verify_key), network)


def test_created_key_is_private_and_reloads(tmp_path):
    path = tmp_path / "keys" / "worker.skey"
    key = create_key(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    body = json.loads(path.read_text())
    assert body["type"] == "ProofnetWorkerSigningKey_ed25519"
    assert body["cborHex"].startswith("5820") and len(body["cborHex"]) == 68
    again = load_key(path)
    assert again.public_key == key.public_key and len(key.public_key) == 32
    assert key.key_id == hashlib.blake2b(key.public_key, digest_size=28).hexdigest()


def test_existing_key_is_never_overwritten(tmp_path):
    path = tmp_path / "worker.skey"
    first, created = load_or_create_key(path)
    assert created
    second, created_again = load_or_create_key(path)
    assert not created_again and second.public_key == first.public_key
    with pytest.raises(IdentityError, match="refusing to overwrite"):
        create_key(path)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_key_readable_by_others_is_refused(tmp_path, mode):
    path = tmp_path / "worker.skey"
    create_key(path)
    os.chmod(path, mode)
    with pytest.raises(IdentityError, match="chmod 600"):
        load_key(path)


def test_malformed_key_files_are_refused(tmp_path):
    path = tmp_path / "worker.skey"
    with pytest.raises(IdentityError, match="does not exist"):
        load_key(path)
    path.write_text('{"type": "PaymentSigningKeyShelley_ed25519", "cborHex": "5820' + "00" * 32)
    os.chmod(path, 0o600)
    with pytest.raises(IdentityError, match="JSON"):
        load_key(path)
    path.write_text(json.dumps({"type": "PaymentSigningKeyShelley_ed25519", "cborHex": ""}))
    with pytest.raises(IdentityError, match="not a proofnet worker key"):
        load_key(path)
    path.write_text(json.dumps({"type": "ProofnetWorkerSigningKey_ed25519", "cborHex": "5820zz"}))
    with pytest.raises(IdentityError, match="cborHex"):
        load_key(path)


def test_binding_verifies(tmp_path):
    key = create_key(tmp_path / "k")
    address = _address()
    binding = bind_payout_address(key, address, "preprod", NONCE)
    assert binding.worker_pubkey == key.public_key_hex and binding.key_id == key.key_id
    verify_payout_binding(
        binding,
        network="preprod",
        nonce=NONCE,
        payout_address=address,
        worker_pubkey=key.public_key_hex,
    )
    # The message is domain-separated canonical JSON.
    msg = binding_message("preprod", key.public_key_hex, address, NONCE)
    assert msg.startswith(b'{"domain":"proofnet/worker-binding/v1","network":"preprod"')
    # And it survives a JSON round trip, as it travels to the API.
    wire = PayoutBinding.model_validate_json(binding.model_dump_json())
    verify_payout_binding(wire, network="preprod", nonce=NONCE)


def test_tampered_bindings_are_rejected(tmp_path):
    key = create_key(tmp_path / "k")
    binding = bind_payout_address(key, _address(), "preprod", NONCE)

    other_address = _address(seed=b"\x02" * 32)
    moved = binding.model_copy(update={"payout_address": other_address})
    with pytest.raises(BindingError, match="signature does not verify"):
        verify_payout_binding(moved, network="preprod", nonce=NONCE)

    other_net = binding.model_copy(update={"network": "preview"})
    with pytest.raises(BindingError, match="signature does not verify"):
        verify_payout_binding(other_net, network="preview", nonce=NONCE)
    with pytest.raises(BindingError, match="network"):
        verify_payout_binding(binding, network="preview", nonce=NONCE)

    other_nonce = binding.model_copy(update={"nonce": "1f" * 16})
    with pytest.raises(BindingError, match="signature does not verify"):
        verify_payout_binding(other_nonce, network="preprod", nonce="1f" * 16)
    with pytest.raises(BindingError, match="nonce"):
        verify_payout_binding(binding, network="preprod", nonce="1f" * 16)

    impostor = bytes(SigningKey(b"\x09" * 32).verify_key).hex()
    with pytest.raises(BindingError, match="signature does not verify"):
        verify_payout_binding(
            binding.model_copy(update={"worker_pubkey": impostor}), network="preprod", nonce=NONCE
        )
    with pytest.raises(BindingError, match="different worker key"):
        verify_payout_binding(binding, network="preprod", nonce=NONCE, worker_pubkey=impostor)
    with pytest.raises(BindingError, match="different payout address"):
        verify_payout_binding(binding, network="preprod", nonce=NONCE, payout_address=other_address)


@pytest.mark.parametrize(
    ("address", "network", "nonce", "words"),
    [
        (_address("mainnet"), "preprod", NONCE, "addr_test"),
        (_address("preprod"), "mainnet", NONCE, "'addr'"),
        (_address("preprod")[:-1] + "q", "preprod", NONCE, "checksum"),
        (_address("preprod"), "testnet", NONCE, "unknown network"),
        (_address("preprod"), "preprod", "abc", "nonce"),
    ],
)
def test_bad_binding_input_is_refused_before_signing(tmp_path, address, network, nonce, words):
    key = create_key(tmp_path / "k")
    with pytest.raises(BindingError, match=words):
        bind_payout_address(key, address, network, nonce)
