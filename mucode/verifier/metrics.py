"""Prometheus metrics of one verifier instance (its own registry: several apps may share a process).

| metric | type | labels | meaning |
|---|---|---|---|
| ``verifier_items_total`` | counter | program, status | items scored, by outcome |
| ``verifier_item_seconds`` | histogram | program | scoring time of one item, queueing excluded |
| ``verifier_request_seconds`` | histogram | endpoint | HTTP request time, end to end |
| ``verifier_requests_total`` | counter | endpoint, code | HTTP requests by status code |
| ``verifier_queue_depth`` | gauge | | items accepted, waiting for a scoring slot |
| ``verifier_items_in_flight`` | gauge | | items being scored now |
| ``verifier_sandbox_pool_size`` / ``_idle`` | gauge | | sandbox pool, as its backend reports |
| ``verifier_sandbox_spread_parts_total`` | gauge | | parts of jobs that idle slots took (docs/sandbox.md) |
| ``verifier_math_workers`` | gauge | | live math-verify workers |
| ``verifier_math_worker_kills_total`` | gauge | | math workers killed by the outer wall-clock limit |
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["VerifierMetrics"]

_ITEM_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class VerifierMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.items = Counter("verifier_items", "Items scored", ["program", "status"], registry=r)
        self.item_seconds = Histogram(
            "verifier_item_seconds", "Scoring time per item", ["program"], buckets=_ITEM_BUCKETS, registry=r
        )
        self.request_seconds = Histogram(
            "verifier_request_seconds", "HTTP request time", ["endpoint"], buckets=_ITEM_BUCKETS, registry=r
        )
        self.requests = Counter("verifier_requests", "HTTP requests", ["endpoint", "code"], registry=r)
        self.queue_depth = Gauge("verifier_queue_depth", "Items waiting for a scoring slot", registry=r)
        self.in_flight = Gauge("verifier_items_in_flight", "Items being scored", registry=r)
        self.pool_size = Gauge("verifier_sandbox_pool_size", "Sandbox pool size", registry=r)
        self.pool_idle = Gauge("verifier_sandbox_pool_idle", "Idle sandboxes", registry=r)
        self.spread_parts = Gauge(
            "verifier_sandbox_spread_parts_total", "Parts of jobs that idle sandbox slots took", registry=r
        )
        self.math_workers = Gauge("verifier_math_workers", "Live math-verify workers", registry=r)
        self.math_kills = Gauge(
            "verifier_math_worker_kills_total", "Math workers killed by the outer limit", registry=r
        )
