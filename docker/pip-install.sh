#!/bin/sh
# pip install inside the verifier image build. With wheels in /wheels (registry-free builds), pip
# runs from its own wheel and installs from there only; otherwise from the configured index.
set -eu
if ls /wheels/*.whl >/dev/null 2>&1; then
    PIP_WHL=$(ls /wheels/pip-*.whl | head -n 1)
    exec python3 "$PIP_WHL/pip" install --no-cache-dir --break-system-packages --no-index --find-links /wheels "$@"
fi
exec python3 -m pip install --no-cache-dir --break-system-packages "$@"
