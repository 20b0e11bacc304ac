"""The Prometheus case: numa-align's per-cell gauge read back through Prometheus' HTTP API while case 1's pods run.

Prometheus on the registry host (the `metrics` stage, `numa_metrics`) scrapes every node's numa-align every
5 s, each target labelled `kubernetes_node` with its node's name (the gauges' own `node` label is the NUMA
node id). The plugin polls the kubelet every 2 s, so the series is asked again until it counts the pod or
time is up. Stdlib only: one GET of /api/v1/query per reading.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

JOB = "numa-align"
NODE_LABEL = "kubernetes_node"  # numalab.model.metrics.NODE_LABEL
GAUGE = "numa_align_node_pods_pinned"
WAIT_SECONDS = 60.0  # a scrape every 5 s after the plugin's 2 s poll, with room for an emulated guest


class PrometheusError(Exception):
    """Prometheus could not be asked, or answered with an error; str() names the URL."""


@dataclass(frozen=True)
class Reading:
    """One instant query: its value (None: no series matched), or why there is none."""

    query: str
    value: float | None = None
    error: str | None = None


def pods_pinned_query(worker: str, node: int) -> str:
    """PromQL selecting the gauge of NUMA node `node` on `worker`."""
    return f'{GAUGE}{{job="{JOB}",{NODE_LABEL}="{worker}",node="{node}"}}'


def query_url(base: str, query: str) -> str:
    return f"{base.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': query})}"


def instant_value(answer: Mapping[str, Any]) -> float | None:
    """The one sample of an instant query's answer; None when no series matched. PrometheusError for an
    error answer, another result type or more than one series (the selector names one cell of one node)."""
    if answer.get("status") != "success":
        raise PrometheusError(f"{answer.get('errorType', 'error')}: {answer.get('error', answer)}")
    data = answer.get("data") or {}
    if data.get("resultType") != "vector":
        raise PrometheusError(f"result type {data.get('resultType')!r}, expected a vector")
    result = data.get("result") or []
    if len(result) > 1:
        raise PrometheusError(f"{len(result)} series match, expected one: {[s.get('metric') for s in result]}")
    return float(result[0]["value"][1]) if result else None


def instant_query(base: str, query: str, timeout: float = 10.0) -> float | None:
    """GET /api/v1/query from `base` (e.g. http://10.77.0.10:9090): the value, or None (no series)."""
    url = query_url(base, query)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            answer = json.load(response)
    except urllib.error.HTTPError as exc:  # a bad query is 400 with Prometheus' JSON error
        try:
            answer = json.load(exc)
        except ValueError:
            raise PrometheusError(f"GET {url}: HTTP {exc.code} {exc.reason}") from None
    except (OSError, ValueError) as exc:
        raise PrometheusError(f"GET {url}: {exc}") from None
    try:
        return instant_value(answer)
    except PrometheusError as exc:
        raise PrometheusError(f"GET {url}: {exc}") from None


def read_pods_pinned(base: str, worker: str, node: int) -> Reading:
    query = pods_pinned_query(worker, node)
    try:
        return Reading(query, instant_query(base, query))
    except PrometheusError as exc:
        return Reading(query, error=str(exc))


def judge_gauge(reading: Reading) -> list[str]:
    """What is wrong while one pinned pod runs on the cell: the gauge must count at least it."""
    if reading.error:
        return [reading.error]
    if reading.value is None:
        return [f"no series {reading.query} (is the node's numa-align a target? see Prometheus' /targets)"]
    if reading.value < 1:
        return [f"{reading.query} is {reading.value:g}, expected >= 1 while the pinned pod runs"]
    return []


def gauge_summary(reading: Reading) -> str:
    return f"{reading.query} = {reading.value:g}" if reading.value is not None else ""
