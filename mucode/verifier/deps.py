"""FastAPI dependencies: the running ``Verifier`` and the optional token check.

With ``MUCODE_TOKEN`` set, a request carries the token in one of three ways, so clients that only take
a URL (OpenRLHF's ``--remote_rm_url``, verl's ``sandbox_fusion.url``) can send it too:

- ``Authorization: Bearer <token>`` (mucode's clients);
- HTTP Basic with the token as the password (any user name), which aiohttp, requests and httpx send
  for a URL with credentials: ``http://mucode:<token>@host:8000/openrlhf/reward``;
- the query parameter ``token``: ``http://host:8000/run_code?token=<token>`` (it appears wherever URLs
  are logged; prefer the Basic form; the service's own access log is off).
"""

from __future__ import annotations

import base64
import binascii
import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from mucode.verifier.core import Verifier

__all__ = ["Authorized", "VerifierDep"]


# Both are ``async def`` though they never wait: FastAPI runs a plain ``def`` dependency in its
# thread pool, two thread hops per request (~0.3 ms each on /run_code's path, measured).
async def get_verifier(request: Request) -> Verifier:
    verifier: Verifier = request.app.state.verifier
    return verifier


def _given_tokens(request: Request) -> list[str]:
    """The tokens a request offers (rules in the module docstring)."""
    given = []
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        given.append(value.strip())
    elif scheme.lower() == "basic":
        try:
            user, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            user, password = "", ""
        given += [password] if password else [user]  # http://TOKEN@host sends the token as the user name
    if "token" in request.query_params:
        given.append(request.query_params["token"])
    return given


async def require_token(request: Request) -> None:
    token = request.app.state.verifier.settings.token
    if token is None:
        return
    expected = token.get_secret_value().encode()
    if not any(hmac.compare_digest(given.encode(), expected) for given in _given_tokens(request)):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            detail="missing or wrong token: send 'Authorization: Bearer <token>', or put it in the URL as "
            "http://user:<token>@host:port/... or ?token=<token> (the server's MUCODE_TOKEN)",
            headers={"WWW-Authenticate": "Bearer"},
        )


VerifierDep = Annotated[Verifier, Depends(get_verifier)]
Authorized = Depends(require_token)
