"""The oracle's durable state: the store of attestations and verdicts (`store`), the escrows
whose cancel it co-signed (`cancel_marks`), the frauds a bond pays for (`fraud`), its
engines (`db`) and table creation (`schema`). The tables themselves are `oracle.models`."""
