"""What a job's author uses: a template repository (`templates`), a spec file read and
explained field by field (`spec_file`, `validation`), and a local run of the harness over
the spec's trainer (`trial`).

Shared ground for the `proofnet job` commands: may import proofnet.messages, pot, yaml;
imported by api.client_cli (the `proofnet job` group); never imports a role.
"""
