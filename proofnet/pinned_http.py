"""HTTP to URLs someone else chose: resolved once, checked, and connected to by address.

`PinnedTransport` is an httpx transport for requests whose URL comes from a job or a user
(data shards, webhook targets). For every request, redirects included, it checks the
scheme (https; http only where the caller allows it), resolves the host once per transport
through the injected resolver, refuses any address `EgressPolicy` refuses, and sends the
request to that address: the URL's host is replaced by the address, while the `Host`
header and the TLS server name (SNI, and the certificate check) stay the name. The name is
never looked up again by anyone, so an answer that changes between the check and the
connection (DNS rebinding) cannot reach loopback. Proxies from the environment are
ignored (a proxy would make its own lookup).

I/O: the connections it opens. It never follows a redirect itself: a client that follows
them sends each hop back through `handle_request`, which checks it like the first.
"""

from __future__ import annotations

import ssl
import threading

import httpx

from proofnet.egress import EgressPolicy, EgressRefused, Resolver, resolve_pinned, system_resolver

DEFAULT_PORTS = {"https": 443, "http": 80}


class PinnedTransport(httpx.BaseTransport):
    """Sends each request to the checked address its host resolved to, once."""

    def __init__(
        self,
        policy: EgressPolicy,
        *,
        resolver: Resolver = system_resolver,
        allow_http: bool = False,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.policy = policy
        self.resolver = resolver
        self.schemes = ("https", "http") if allow_http else ("https",)
        self._inner = httpx.HTTPTransport(verify=verify, trust_env=False)
        self._pinned: dict[tuple[str, int], str] = {}
        self._lock = threading.Lock()

    def address_of(self, host: str, port: int) -> str:
        """The address `host` is pinned to for this transport (resolved on first use)."""
        key = (host.lower(), port)
        with self._lock:
            if key not in self._pinned:
                self._pinned[key] = resolve_pinned(host, port, self.policy, self.resolver)
            return self._pinned[key]

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme not in self.schemes:
            raise EgressRefused(
                f"refusing a {url.scheme}:// URL: only {', '.join(self.schemes)} is allowed"
            )
        if url.userinfo:
            # httpx already moved them into an Authorization header; we send none.
            raise EgressRefused("refusing a URL that carries credentials")
        port = url.port or DEFAULT_PORTS[url.scheme]
        address = self.address_of(url.host, port)
        pinned = httpx.Request(
            request.method,
            url.copy_with(host=address),
            headers=request.headers,  # keeps Host: <name>
            stream=request.stream,
            extensions={**request.extensions, "sni_hostname": url.host},
        )
        response = self._inner.handle_request(pinned)
        return response

    def close(self) -> None:
        self._inner.close()


def pinned_client(
    policy: EgressPolicy,
    *,
    resolver: Resolver = system_resolver,
    allow_http: bool = False,
    verify: ssl.SSLContext | bool = True,
    timeout: float = 30.0,
    max_redirects: int = 0,
) -> httpx.Client:
    """An httpx client whose every request (and redirect hop) goes through a PinnedTransport.
    `max_redirects=0`: a redirect is answered as it is (never followed)."""
    return httpx.Client(
        transport=PinnedTransport(policy, resolver=resolver, allow_http=allow_http, verify=verify),
        timeout=timeout,
        follow_redirects=max_redirects > 0,
        max_redirects=max(max_redirects, 1),
        trust_env=False,
    )
