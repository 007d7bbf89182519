"""Expected failures of a console command, told in one line.

A mistake a user can fix (a service that does not answer, a key file in the wrong format, a
bad option value, a missing or invalid setting, an unknown chain backend) ends a command with
one line on stderr that names the option or setting and the fix, and exit code 2; `proofnet
--debug ...` shows the traceback instead. Anything else is a bug and keeps its traceback.

`explain(exc)` is the translation: pure (it reads the exception chain and the environment,
never the network), and it imports no role, so the console stays quick to start.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator, Mapping

EXIT_CODE = 2

# Where each chain backend is reached, and what to do when it does not answer.
_BACKEND_HINT = {
    "devnet": "PROOFNET_DEVNET_URL (is the devnet running? `proofnet devnet up`)",
    "ogmios": "PROOFNET_OGMIOS_URL (is Ogmios running and synced?)",
    "blockfrost": "PROOFNET_NETWORK and PROOFNET_BLOCKFROST_PROJECT_ID",
}
_SETTING_HINT = {
    "PROOFNET_DEVNET_URL": _BACKEND_HINT["devnet"],
    "PROOFNET_OGMIOS_URL": _BACKEND_HINT["ogmios"],
}
_UNREACHABLE = (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ETIMEDOUT)
# urllib3 ("host='h', port=9") and libpq ('server at "h", port 9') name the address so.
_HOST_PORT = re.compile(r"""(?:host='([^']+)', port=|server at "([^"]+)", port )(\d+)""")
_URL = re.compile(r"\b(?:https?|wss?)://[^\s'\")]+")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _url_of(exc: BaseException) -> str | None:
    """The address a connection failure was for, when the exception says it."""
    for link in _chain(exc):
        request = getattr(link, "request", None)
        url = getattr(request, "url", None) if request is not None else None
        if url:
            return str(url)
        text = str(link)
        if found := _HOST_PORT.search(text):
            return f"{found.group(1) or found.group(2)}:{found.group(3)}"
        if found := _URL.search(text):
            return found.group(0)
    return None


def _base(url: str) -> str:
    """scheme://host:port of an address (its path and query say nothing to the user)."""
    match = re.match(r"^((?:[a-z]+://)?[^/?#]+)", url)
    return match.group(1) if match else url


def _reason(exc: BaseException) -> str:
    """The root cause in a few words: 'connection refused', 'name not known', ..."""
    for link in reversed(list(_chain(exc))):
        if isinstance(link, OSError) and link.strerror:
            return link.strerror.lower()
        if found := re.search(r"\[Errno -?\d+\] ([^'\")]+)", str(link)):
            return found.group(1).strip().lower()
        if "Connection refused" in str(link):
            return "connection refused"
    return str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__


def _unreachable(exc: BaseException) -> bool:
    for link in _chain(exc):
        names = _names(link)
        if names & {"ConnectError", "ConnectTimeout", "NewConnectionError", "InvalidURI"}:
            return True
        if "ConnectionError" in names and "requests" in type(link).__module__:
            return True
        if "OperationalError" in names and "Connection refused" in str(link):
            return True  # a database that does not answer (SQLAlchemy over libpq)
        if isinstance(link, ConnectionRefusedError) or (
            isinstance(link, OSError) and link.errno in _UNREACHABLE
        ):
            return True
    return False


def _setting_for(url: str | None, params: Mapping[str, object], env: Mapping[str, str]) -> str:
    """The option or setting that named `url` (else the chain backend's settings)."""
    if url is not None:
        bare = re.sub(r"^[a-z]+://", "", url).rstrip("/")
        host_port = bare.split("/", 1)[0]
        for name, value in params.items():
            if isinstance(value, str) and host_port and host_port in value:
                return "--" + name.replace("_", "-")
            if isinstance(value, list | tuple) and any(
                isinstance(v, str) and host_port in v for v in value
            ):
                return "--" + name.replace("_", "-")
        for name, value in sorted(env.items()):
            if name.startswith("PROOFNET_") and host_port and host_port in value:
                return _SETTING_HINT.get(name, name)
    backend = env.get("PROOFNET_CHAIN_BACKEND", "devnet")
    return _BACKEND_HINT.get(backend, "PROOFNET_CHAIN_BACKEND")


def _settings_line(exc: BaseException) -> str | None:
    """A pydantic ValidationError of the settings: the variable, what is wrong, the fix."""
    errors = getattr(exc, "errors", None)
    title = getattr(exc, "title", "")
    if not callable(errors) or title != "Settings":
        return None
    parts = []
    for error in errors():
        field = "_".join(str(p) for p in error.get("loc", ()))
        parts.append(f"PROOFNET_{field.upper()}: {error.get('msg')} (got {error.get('input')!r})")
    return "invalid setting " + "; ".join(parts) + " (fix the environment variable or .env)"


def explain(
    exc: BaseException,
    *,
    params: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
) -> str | None:
    """One line for an expected failure (None for a bug: keep its traceback).

    `params` are the failing command's option values (to name the option a bad address came
    from); `env` is the environment (default: os.environ)."""
    params = params or {}
    env = os.environ if env is None else env
    if (line := _settings_line(exc)) is not None:
        return line
    names = _names(exc)
    if "BackendConfigError" in names:
        if "set PROOFNET_" in str(exc):
            return str(exc)  # it names its setting already; a second hint would mislead
        backend = env.get("PROOFNET_CHAIN_BACKEND", "devnet")
        return f"{exc} (chain backend {backend!r}: set {_BACKEND_HINT.get(backend, 'PROOFNET_CHAIN_BACKEND')})"
    if _unreachable(exc):
        url = _url_of(exc)
        setting = _setting_for(url, params, env)
        if url is None and setting.startswith("PROOFNET_OGMIOS_URL"):
            url = env.get("PROOFNET_OGMIOS_URL", "ws://127.0.0.1:1337")
        where = f" {_base(url)}" if url else ""
        return f"cannot reach{where} ({_reason(exc)}): check {setting}"
    missing = next((link for link in _chain(exc) if isinstance(link, FileNotFoundError)), None)
    if missing is not None:
        name = str(missing.filename or "")
        named = _naming(name, params, env) if name else None
        fix = f"check {named}" if named else "check the path option or setting"
        return f"{name or missing}: no such file ({fix})"
    return None


def _naming(value: str, params: Mapping[str, object], env: Mapping[str, str]) -> str | None:
    """The option or PROOFNET_ setting whose value is `value` (a path), if one is."""
    for name, given in params.items():
        if given is not None and str(given) == value:
            return "--" + name.replace("_", "-")
    for name, given in sorted(env.items()):
        if name.startswith("PROOFNET_") and given and given == value:
            return name
    return None


def usage_line(message: str, command_path: str) -> str:
    """A usage error (missing option, bad value) in one line, with where to read more."""
    return f"{message.strip().rstrip('.')} (see `{command_path} --help`)"
