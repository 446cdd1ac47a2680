"""One router per concern: verify, run_code (SandboxFusion), health, metrics."""
