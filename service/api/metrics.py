"""/metrics: Prometheus text, computed from the database on each scrape.

A custom collector rather than counters in this process: with several API replicas and
workers, only the database knows how many runs are queued or how long builds take."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.api.deps import ContextDep
from service.models import RunState
from service.queries.stats import runs_by_state, step_duration_histograms

router = APIRouter(tags=["health"])


class RunsCollector(Collector):
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def collect(self) -> Iterator[Metric]:
        with Session(self._engine) as session:
            by_state = runs_by_state(session)
            histograms = step_duration_histograms(session)
        runs = GaugeMetricFamily("ootci_runs", "Runs by state", labels=["state"])
        for state in RunState:
            runs.add_metric([state.value], by_state.get(state.value, 0))
        yield runs
        yield GaugeMetricFamily(
            "ootci_queue_depth",
            "Runs waiting for a worker (state queued)",
            value=by_state.get(RunState.QUEUED.value, 0),
        )
        durations = HistogramMetricFamily(
            "ootci_step_duration_seconds", "Duration of finished steps", labels=["step"]
        )
        for step, h in sorted(histograms.items()):
            durations.add_metric([step], h.buckets, sum_value=h.total)
        yield durations


def make_registry(engine: Engine) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunsCollector(engine))
    return registry


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus exposition"}},
    summary="Prometheus metrics",
)
def metrics(ctx: ContextDep) -> Response:
    registry = make_registry(ctx.engine)
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
