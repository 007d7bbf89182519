"""The deployment's live UTxOs: the config NFT UTxO and the reference scripts."""

from __future__ import annotations

from dataclasses import dataclass

from pycardano import ChainContext, ScriptHash, UTxO, VerificationKeyHash

from chain.contracts import types as t
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.errors import BuilderError
from chain.offchain.builders.onchain import datum_cbor, out_ref_text


@dataclass(frozen=True)
class ProtocolUtxos:
    config: UTxO
    escrow_script: UTxO
    batch_script: UTxO
    config_script: UTxO

    @property
    def config_datum(self) -> t.OracleConfigDatum:
        datum = self.config.output.datum
        if datum is None:
            raise BuilderError("the config UTxO has no inline datum")
        try:
            return t.OracleConfigDatum.from_cbor(datum_cbor(datum))
        except Exception as exc:  # pycardano raises assorted errors on foreign data
            raise BuilderError(
                f"the config UTxO does not hold an OracleConfigDatum: {exc}"
            ) from exc

    def check_oracle_quorum(self, signers: list[VerificationKeyHash]) -> None:
        cfg = self.config_datum
        known = {k for k in cfg.oracles}
        count = len({s.payload for s in signers} & known)
        if count < cfg.threshold:
            raise BuilderError(
                f"{count} of the given signers are oracles of the config; {cfg.threshold} needed"
            )


def holds_config_nft(utxo: UTxO, deployment: Deployment) -> bool:
    policy = ScriptHash(bytes.fromhex(deployment.config_policy))
    name = bytes.fromhex(deployment.config_name)
    return any(
        p == policy and any(n.payload == name and q == 1 for n, q in assets.items())
        for p, assets in utxo.output.amount.multi_asset.items()
    )


def check_config_address(utxo: UTxO, deployment: Deployment) -> None:
    """The config NFT counts only at the oracle-config script (whose hash is the NFT's
    policy in this build, which the scripts check); anywhere else it is not the config."""
    if utxo.output.address.payment_part != ScriptHash(bytes.fromhex(deployment.oracle_config_hash)):
        raise BuilderError(
            f"the config NFT UTxO {out_ref_text(utxo.input)} is at {utxo.output.address}, "
            f"not at the oracle-config script {deployment.config_address}: refusing it"
        )


def resolve(context: ChainContext, deployment: Deployment) -> ProtocolUtxos:
    """Find the config NFT UTxO at the oracle-config script (whichever UTxO holds it after
    updates) and the reference-script UTxOs named by the deployment. A config NFT that the
    backend reports at any other address is refused, not trusted."""
    found = list(context.utxos(deployment.config_address))
    configs = [u for u in found if holds_config_nft(u, deployment)]
    for u in configs:
        check_config_address(u, deployment)
    if len(configs) != 1:
        raise BuilderError(
            f"expected one config NFT UTxO at {deployment.config_address}, found {len(configs)}"
        )
    by_ref = {out_ref_text(u.input): u for u in found}

    def script_utxo(field: str) -> UTxO:
        ref = getattr(deployment, field)
        utxo = by_ref.get(ref)
        if utxo is None or utxo.output.script is None:
            raise BuilderError(f"reference script {field} {ref} is not on chain")
        return utxo

    return ProtocolUtxos(
        config=configs[0],
        escrow_script=script_utxo("escrow_script_ref"),
        batch_script=script_utxo("batch_script_ref"),
        config_script=script_utxo("config_script_ref"),
    )
