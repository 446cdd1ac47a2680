"""FastAPI dependencies: the running ``Verifier`` and the optional bearer-token check."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from mucode.verifier.core import Verifier

__all__ = ["Authorized", "VerifierDep"]


def get_verifier(request: Request) -> Verifier:
    verifier: Verifier = request.app.state.verifier
    return verifier


def require_token(request: Request) -> None:
    token = request.app.state.verifier.settings.token
    if token is None:
        return
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode(), token.get_secret_value().encode()
    ):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            detail="missing or wrong bearer token: send 'Authorization: Bearer <token>' (the server's MUCODE_TOKEN)",
            headers={"WWW-Authenticate": "Bearer"},
        )


VerifierDep = Annotated[Verifier, Depends(get_verifier)]
Authorized = Depends(require_token)
