"""The verifier: scores model responses with reward programs, as an HTTP service or in process.

Modules: ``protocol`` (the wire types shared by client and service), ``client`` (the async HTTP
client, the one retry layer), ``session`` (a background session for synchronous callers), ``core``
(the ``Verifier`` the service and ``mucode verify`` run), ``app`` (the FastAPI app factory) and
``local`` (a service on a loopback port, for tests and tools). Importing this package imports none
of them: the service's dependencies (FastAPI, uvicorn) load only where they are used.
"""

__all__: list[str] = []
