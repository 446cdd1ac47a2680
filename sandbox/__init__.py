"""The in-sandbox executor: standard-library-only files copied into the sandbox image (and bound
read-only into the local backend's jail) at ``/opt/sandbox``, where they run as plain scripts
(``python3 -I -S /opt/sandbox/executor.py``) and import each other as top-level modules.

It ships inside the ``mucode`` package so that an installed wheel carries it; ``mucode`` itself
imports only ``protocol`` from here (the wire format, shared by executor, client, the compose health
check and the tests). Nothing in this directory may import ``mucode`` or a third-party package:
inside the image there is only a bare ``python3``. ``EXECUTOR_DIR`` is where the files are.
"""

from pathlib import Path

EXECUTOR_DIR = Path(__file__).resolve().parent
