"""``python -m mucode.verifier``: serve with settings from ``MUCODE_*`` only (the container entry point).

Unlike ``mucode serve`` it imports nothing outside the verifier's layers (no trainer, no torch).
mucode's own log records go to standard error at INFO, as with ``mucode serve``.
"""

from __future__ import annotations

from mucode import logs
from mucode.verifier.settings import VerifierSettings


def main() -> None:
    import uvicorn  # lazy: uvicorn

    from mucode.verifier.app import create_app  # lazy: fastapi

    logs.configure()
    settings = VerifierSettings()
    uvicorn.run(
        create_app(settings), host=settings.host, port=settings.port, log_level="info", access_log=False
    )


if __name__ == "__main__":
    main()
