"""Which network addresses a machine of ours may connect to on behalf of someone else.

A job names URLs (its data, its repository) and a user names a webhook target; the machine
that connects (a provider's host, the API) must never be made to reach itself, its LAN or
its cloud's metadata service. `EgressPolicy.check` refuses every address that is not
globally routable: loopback, private (RFC 1918, IPv6 ULA), link-local (169.254/16, the
metadata services, fe80::/10), shared CGNAT space (100.64/10), multicast, reserved and
unspecified addresses, documentation and benchmarking ranges, and the same addresses
wrapped in IPv6 (v4-mapped ::ffff:a.b.c.d, 6to4, NAT64, Teredo). A provider (or a devnet)
may allow chosen networks back in (`allow`), e.g. a dataset mirror on its own LAN.

`resolve_pinned` resolves a host name once, through an injectable `Resolver`, and returns
the one address the caller must connect to (every answer must pass, so a name that answers
a public and a private address is refused). Callers connect to that address, never to the
name again: a second lookup is how DNS rebinding reaches loopback. Pure decisions plus one
resolver call; this module never opens a connection.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# host, port -> the addresses the name resolves to (as text). Tests inject their own.
Resolver = Callable[[str, int], Sequence[str]]

# Named so that a refusal says which kind of address it met (first match wins).
_NAMED: tuple[tuple[str, IPNetwork], ...] = tuple(
    (name, ipaddress.ip_network(net))
    for name, net in (
        ("the cloud metadata service", "169.254.169.254/32"),
        ("the cloud metadata service", "fd00:ec2::254/128"),
        ("the cloud metadata service", "100.100.100.200/32"),
        ("shared CGNAT space", "100.64.0.0/10"),
    )
)
# IPv6 prefixes that carry an IPv4 address in their last 32 bits (NAT64).
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


class EgressRefused(Exception):
    """A URL or address this machine will not connect to; the message says why."""


def system_resolver(host: str, port: int) -> Sequence[str]:
    """The host's resolver (getaddrinfo), every address it answers."""
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as e:
        raise EgressRefused(f"cannot resolve {host!r}: {e}") from e
    return [str(info[4][0]) for info in infos]


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]  # the client's address
    if any(ip in net for net in _NAT64):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if int(ip) >> 32 == 0 and int(ip) > 0xFFFF:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)  # IPv4-compatible ::a.b.c.d
    return None


def _kind(ip: IPAddress) -> str | None:
    """What kind of non-public address `ip` is; None when it is public."""
    for name, net in _NAMED:
        if ip.version == net.version and ip in net:
            return name
    checks = (
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("private", ip.is_private),
        ("reserved", ip.is_reserved),
    )
    for name, hit in checks:
        if hit:
            return name
    if not ip.is_global:
        return "not globally routable"
    return None


def _parse(address: str) -> IPAddress:
    try:
        # A zone (fe80::1%eth0) never names a public address.
        return ipaddress.ip_address(address.split("%", 1)[0].strip("[]"))
    except ValueError as e:
        raise EgressRefused(f"{address!r} is not an IP address") from e


@dataclass(frozen=True)
class EgressPolicy:
    """Public addresses only, plus the networks in `allow` (the provider's own choice)."""

    allow: tuple[IPNetwork, ...] = ()

    @classmethod
    def allowing(cls, networks: Sequence[str]) -> EgressPolicy:
        """From setting text ("10.0.0.0/8", "127.0.0.1"); a bad entry raises ValueError."""
        return cls(tuple(ipaddress.ip_network(n.strip(), strict=False) for n in networks))

    def refusal(self, address: str) -> str | None:
        """Why `address` is refused, or None when it may be connected to."""
        ip = _parse(address)
        inner = _embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else None
        if self._allowed(ip) or (inner is not None and self._allowed(inner)):
            return None
        # A wrapped IPv4 address is judged as what it wraps (v4-mapped loopback is loopback).
        wrapped = None if inner is None else _kind(inner)
        if wrapped is not None:
            return f"{ip} is a {wrapped} address (as {inner} inside an IPv6 address)"
        kind = _kind(ip)
        if kind is None:
            return None
        return f"{ip} is {kind}" if kind.startswith("not") else f"{ip} is a {kind} address"

    def _allowed(self, ip: IPAddress) -> bool:
        return any(ip.version == net.version and ip in net for net in self.allow)

    def check(self, address: str) -> IPAddress:
        """`address`, parsed, or EgressRefused."""
        reason = self.refusal(address)
        if reason is not None:
            raise EgressRefused(f"refusing to connect: {reason}")
        return _parse(address)


def resolve_pinned(
    host: str, port: int, policy: EgressPolicy, resolver: Resolver = system_resolver
) -> str:
    """The one address to connect to for `host`: resolved once, every answer allowed."""
    if not host:
        raise EgressRefused("the URL names no host")
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    if literal is not None:
        return str(policy.check(str(literal)))
    answers = list(resolver(host, port))
    if not answers:
        raise EgressRefused(f"{host!r} resolves to no address")
    for answer in answers:
        reason = policy.refusal(answer)
        if reason is not None:
            raise EgressRefused(f"refusing to connect to {host!r}: it resolves to {reason}")
    return str(_parse(answers[0]))
