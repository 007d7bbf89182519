"""The address policy and the pinned HTTP transport, played as the attacker.

Every refused address is one a job or a user could name to make our machine reach itself,
its LAN or its cloud's metadata service. The transport tests use real sockets: local
servers on 127.0.0.1 (allowed back in by the policy where a test needs a "public" host),
a throwaway CA for TLS, and a scripted resolver for DNS.
"""

from __future__ import annotations

import httpx
import pytest

from proofnet.egress import EgressPolicy, EgressRefused, resolve_pinned
from proofnet.pinned_http import pinned_client
from tests.net_servers import Redirect, ScriptedResolver, names, serve, tls_for

PUBLIC = EgressPolicy()
# The local test server stands in for a public host: only 127.0.0.1 itself is let back in.
LOCAL_AS_PUBLIC = EgressPolicy.allowing(["127.0.0.1/32"])


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.1.2.3",
        "0.0.0.0",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",  # cloud metadata
        "169.254.1.1",
        "100.64.0.1",  # CGNAT
        "100.100.100.200",  # Alibaba metadata
        "224.0.0.1",  # multicast
        "240.0.0.1",  # reserved
        "255.255.255.255",
        "198.18.0.1",  # benchmarking
        "192.0.2.1",  # documentation
        "::1",
        "::",
        "fe80::1",
        "fe80::1%eth0",
        "fc00::1",
        "fd00:ec2::254",  # AWS metadata over IPv6
        "ff02::1",
        "ff0e::1",  # global-scope multicast is still multicast
        "::ffff:127.0.0.1",  # v4-mapped loopback
        "::ffff:169.254.169.254",
        "::ffff:10.0.0.1",
        "2002:7f00:1::1",  # 6to4 around 127.0.0.1
        "2002:a9fe:a9fe::1",  # 6to4 around 169.254.169.254
        "64:ff9b::7f00:1",  # NAT64 around 127.0.0.1
        "64:ff9b::a9fe:a9fe",
    ],
)
def test_non_public_addresses_are_refused(address: str) -> None:
    assert PUBLIC.refusal(address) is not None
    with pytest.raises(EgressRefused):
        PUBLIC.check(address)


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700::1111"])
def test_public_addresses_pass(address: str) -> None:
    assert PUBLIC.refusal(address) is None


def test_a_provider_allows_its_own_network_back_in() -> None:
    policy = EgressPolicy.allowing(["10.0.0.0/8"])
    assert policy.refusal("10.2.3.4") is None
    assert policy.refusal("::ffff:10.2.3.4") is None
    assert policy.refusal("192.168.0.1") is not None


def test_a_name_resolving_to_loopback_is_refused() -> None:
    with pytest.raises(EgressRefused, match="loopback"):
        resolve_pinned(
            "evil.example.test", 443, PUBLIC, names({"evil.example.test": ["127.0.0.1"]})
        )


def test_a_name_with_one_private_answer_among_public_ones_is_refused() -> None:
    resolver = names({"mixed.example.test": ["8.8.8.8", "10.0.0.1"]})
    with pytest.raises(EgressRefused, match="private"):
        resolve_pinned("mixed.example.test", 443, PUBLIC, resolver)


def test_https_is_pinned_to_the_checked_address_with_the_name_as_host_and_sni() -> None:
    tls = tls_for("data.example.test")
    resolver = names({"data.example.test": ["127.0.0.1"]})
    with serve({"/a": b"hello"}, tls=tls) as server:
        client = pinned_client(LOCAL_AS_PUBLIC, resolver=resolver, verify=tls.ca_context())
        with client:
            url = server.url("data.example.test", "/a")
            assert client.get(url).content == b"hello"
            assert client.get(url).content == b"hello"
    # The name is never resolved by the system (it does not exist there); ours, once.
    assert resolver.lookups == [("data.example.test", server.port)]
    assert {(s.host, s.sni) for s in server.seen} == {
        (f"data.example.test:{server.port}", "data.example.test")
    }


def test_the_certificate_is_checked_against_the_name_not_the_address() -> None:
    tls = tls_for("other.example.test")
    resolver = names({"data.example.test": ["127.0.0.1"]})
    with (
        serve({"/a": b"hello"}, tls=tls) as server,
        pinned_client(LOCAL_AS_PUBLIC, resolver=resolver, verify=tls.ca_context()) as c,
        pytest.raises(httpx.ConnectError),
    ):
        c.get(server.url("data.example.test", "/a"))


def test_plain_http_is_refused_unless_allowed() -> None:
    resolver = names({"data.example.test": ["127.0.0.1"]})
    with serve({"/a": b"plain"}) as server:
        with (
            pinned_client(LOCAL_AS_PUBLIC, resolver=resolver) as client,
            pytest.raises(EgressRefused, match="only https"),
        ):
            client.get(server.url("data.example.test", "/a"))
        with pinned_client(LOCAL_AS_PUBLIC, resolver=resolver, allow_http=True) as client:
            assert client.get(server.url("data.example.test", "/a")).content == b"plain"


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://127.0.0.2:1/",
        "http://[::ffff:127.0.0.2]:1/",
        "http://[::1]:1/",
        "http://internal.example.test/secret",  # resolves to 10.0.0.5
        "file:///etc/passwd",
    ],
)
def test_a_redirect_into_a_refused_range_is_refused(target: str) -> None:
    resolver = names({"data.example.test": ["127.0.0.1"], "internal.example.test": ["10.0.0.5"]})
    # Only the first hop's exact address is let in; where the redirect points is not.
    policy = LOCAL_AS_PUBLIC
    with serve({"/a": Redirect(target)}) as server:
        client = pinned_client(policy, resolver=resolver, allow_http=True, max_redirects=5)
        with client, pytest.raises((EgressRefused, httpx.UnsupportedProtocol)):
            client.get(server.url("data.example.test", "/a"))
    assert [s.path for s in server.seen] == ["/a"]


def test_dns_rebinding_cannot_move_the_connection_to_another_address() -> None:
    """The name answers the allowed address first, then a loopback victim's: the one
    connection made goes to the first answer, and the name is never looked up again."""
    resolver = ScriptedResolver([["127.0.0.1"], ["127.0.0.2"]])
    with (
        serve({"/hook": b"ok"}) as public,
        serve({"/hook": b"stolen"}, host="127.0.0.2", port=public.port) as victim,
        pinned_client(LOCAL_AS_PUBLIC, resolver=resolver, allow_http=True) as client,
    ):
        for _ in range(3):
            assert client.post(public.url("hooks.example.test", "/hook")).content == b"ok"
    assert len(resolver.lookups) == 1
    assert victim.seen == []
    assert len(public.seen) == 3
