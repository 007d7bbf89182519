"""git options that pin a fetch from a URL someone else chose to its checked address.

A job names its repository; git fetches it from a host of ours. `pinned_git_options`
allows https only, resolves the host once (`proofnet.egress`: public addresses only, or
networks the operator lets back in) and returns the `-c` options that make git (curl)
connect to that address under the URL's name (`http.curloptResolve`, git >= 2.37), follow
no redirect, use no proxy and speak no other protocol. Run git with them, and with no
proxy variables in its environment (`PROXY_VARIABLES`). Pure, but for the one lookup.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from proofnet.egress import EgressPolicy, EgressRefused, Resolver, resolve_pinned, system_resolver

# A proxy would make its own lookup of the job's host.
PROXY_VARIABLES = (
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
)


def pinned_git_options(
    url: str, policy: EgressPolicy, resolver: Resolver = system_resolver
) -> tuple[str, ...]:
    """The `-c` options for fetching `url`, or EgressRefused (not https, a refused address)."""
    parts = urlsplit(url)
    if parts.scheme != "https":
        raise EgressRefused(f"only https:// repositories are fetched, not {parts.scheme}://")
    try:
        port = parts.port or 443
    except ValueError as e:
        raise EgressRefused(f"the repository URL has an invalid port: {e}") from e
    host = parts.hostname or ""
    address = resolve_pinned(host, port, policy, resolver)
    shown = f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
    return (
        "-c",
        f"http.curloptResolve={host}:{port}:{shown}",
        "-c",
        "http.followRedirects=false",
        "-c",
        "http.proxy=",
        "-c",
        "protocol.allow=never",
        "-c",
        "protocol.https.allow=always",
    )
