"""Prometheus metrics of one server, in a registry of its own.

Each app owns its :class:`ServerMetrics` (no module-level collectors), so several apps in one
process (tests, Ray Serve replicas) never share or double-register counters.
"""
from __future__ import annotations

from prometheus_client import (CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram,
                               generate_latest)

_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
_AHEAD_BUCKETS = (0, 1, 2, 3, 4, 5, 6, 8, 12, 16, 32, 64, 128, 256, 1024, 4096)
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                    10, 30, 60, 120)


class ServerMetrics:
    """Requests, samples, errors by kind, queue depth, batch sizes, latencies, and the samples a
    request's first sample waited behind (fairness)."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("rewardkit_requests", "HTTP requests by endpoint and status",
                                ["endpoint", "status"], registry=r)
        self.samples = Counter("rewardkit_samples", "samples scored, by reward", ["reward"],
                               registry=r)
        self.errors = Counter("rewardkit_sample_errors", "samples answered with an error Score, "
                              "by reward and error kind", ["reward", "kind"], registry=r)
        self.queue_depth = Gauge("rewardkit_queue_samples", "samples waiting or being scored",
                                 ["reward"], registry=r)
        self.batch_size = Histogram("rewardkit_batch_samples", "samples per batch given to a "
                                    "Scorer", ["reward"], buckets=_BATCH_BUCKETS, registry=r)
        self.samples_ahead = Histogram("rewardkit_samples_ahead", "other requests' samples a "
                                       "request's first sample waited behind (being scored when "
                                       "it arrived, handed to a worker before it, or in its "
                                       "batch)", ["reward"], buckets=_AHEAD_BUCKETS, registry=r)
        self.batch_latency = Histogram("rewardkit_batch_seconds", "time to score one batch",
                                       ["reward"], buckets=_LATENCY_BUCKETS, registry=r)
        self.request_latency = Histogram("rewardkit_request_seconds", "request latency",
                                         ["endpoint"], buckets=_LATENCY_BUCKETS, registry=r)
        self.rejected = Counter("rewardkit_rejected_requests", "requests refused before scoring "
                                "(queue full, too large, unauthorised)", ["reason"], registry=r)
        self.worker_restarts = Counter("rewardkit_worker_restarts", "scoring workers replaced "
                                       "after a crash", ["reward"], registry=r)
        self.idempotency_entries = Gauge("rewardkit_idempotency_cache_entries", "request ids "
                                         "whose reply is kept for retries", registry=r)
        self.idempotency_bytes = Gauge("rewardkit_idempotency_cache_bytes", "bytes of the "
                                       "replies kept for retries", registry=r)
        self.connections_refused = Counter("rewardkit_connections_refused", "connections cut "
                                           "before a request (header_timeout, "
                                           "headers_too_large, too_many_connections)", ["reason"], registry=r)
        self.inflight_body_bytes = Gauge("rewardkit_inflight_body_bytes", "bytes of scoring "
                                         "request bodies held now (read or being answered)",
                                         registry=r)
        self.idempotent_hits = Counter("rewardkit_idempotent_replays", "retried requests "
                                       "answered from their first attempt", registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)
