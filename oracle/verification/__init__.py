"""The verdict on one attestation (`verify`), and the checks it draws on: units of a topology
(`unit_checks`), proof-bounded metering (`metering`), the proof's manifest (`proof_checks`),
and spot checks run as verification units by drawn verifier workers (`verifiers`,
`spotcheck`, `stage_data`). Reads the chain and the feed; writes nothing."""
