"""Adapters that plug mucode into other training frameworks.

Nothing here is imported by ``import mucode``; each adapter is imported explicitly (for verl:
``VERL_USE_EXTERNAL_MODULES=mucode.integrations.verl.register``, see docs/verl.md).
"""
