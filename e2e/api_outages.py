"""A restarting API server, waited out and reported: the e2e client's retry policy (kube.connect uses it once
the server has answered) and the record of every request it refused or deferred, printed at the run's end."""

from __future__ import annotations

import time
from typing import Any

import urllib3


class Outages:
    """Requests the API server refused (connection) or deferred (Retry-After) after the run had reached it."""

    def __init__(self) -> None:
        self.refused: list[tuple[float, str]] = []  # (time.time(), what urllib3 said)

    def add(self, error: str) -> None:
        self.refused.append((time.time(), error))

    def summary(self) -> str:
        """One line for the run's end; '' when the API server never went away."""
        if not self.refused:
            return ""
        first, last = self.refused[0][0], self.refused[-1][0]
        return (f"the API server refused or deferred {len(self.refused)} request(s) between "
                f"{time.strftime('%H:%M:%S', time.localtime(first))} and "
                f"{time.strftime('%H:%M:%S', time.localtime(last))} ({last - first:.0f}s); "
                f"the cases waited for it (last: {self.refused[-1][1]})")


record = Outages()
"""This run's outages: OutageRetry adds to it, the suite's end prints its summary."""


class Deadline:
    """A wait's time limit that does not run while the API server is away.

    A case waiting for a pod reads it through the API server; while the server restarts (minutes on an
    emulated guest) the kubelet cannot report either, so that time is not the pod's. Each `passed()` call
    that finds the record grew since the last one gives the wait back the time between the two.
    """

    def __init__(self, seconds: float, outages: Outages | None = None) -> None:
        self.seconds = seconds
        self.outages = outages or record
        now = time.monotonic()
        self._end = now + seconds
        self._last = (now, len(self.outages.refused))
        self.given_back = 0.0

    def passed(self) -> bool:
        now = time.monotonic()
        then, count = self._last
        if len(self.outages.refused) > count:
            self._end += now - then
            self.given_back += now - then
        self._last = (now, len(self.outages.refused))
        return now > self._end

    def describe(self) -> str:
        """'180s', or '180s plus 95s the API server was away'."""
        away = f" plus {self.given_back:.0f}s the API server was away" if self.given_back else ""
        return f"{self.seconds:.0f}s{away}"

OUTAGE_ATTEMPTS = 40
OUTAGE_BACKOFF_MAX = 15.0  # seconds between attempts: 40 attempts wait about 9 minutes in all
OUTAGE_DEFERRALS = 20  # answers with Retry-After (the API server says when: 1 s while it starts)
OUTAGE_READS = 5  # idempotent requests cut off with no answer (the server stopped under them)
OUTAGE_SERVER_ERRORS = 6  # idempotent requests answered 500/504: etcd stopped or slow under the API server


class OutageRetry(urllib3.util.Retry):
    """Retry what a restarting API server could not have acted on, or what is safe to send twice, and nothing
    else.

    A restarting kube-apiserver (systemd brings it back in seconds, its start takes minutes on an
    emulated guest) first refuses connections (nothing was sent), then may answer 429/503 with Retry-After
    while it starts (the request was not processed: client-go retries those for every verb, and so do we,
    after the time it asks). A request cut off by its stop (the connection closed with no answer) is sent
    again only when sending it twice does what sending it once does: urllib3's idempotent methods (GET,
    PUT, DELETE, ...; a DELETE answered 404 the second time is its callers' to take as done). A POST so cut
    off is raised: the create may have happened (Cluster.create_* checks). The same holds for the answers
    of an API server whose etcd restarts under it: 500 ("rpc error: code = Unavailable desc = error reading
    from server: EOF", seen in the lab) and 504 (a storage timeout) say the request met a storage error,
    done or not; an idempotent one is sent again, OUTAGE_SERVER_ERRORS times at most; a POST is raised to
    kube.created, which looks before it creates again. Every other error or status is the case's to judge,
    at once.
    """

    DEFERRED = frozenset({429, 503})
    STORAGE_ERRORS = frozenset({500, 504})

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("total", None)
        kwargs.setdefault("connect", OUTAGE_ATTEMPTS)
        kwargs.setdefault("status", OUTAGE_DEFERRALS)
        kwargs.setdefault("read", OUTAGE_READS)  # idempotent methods only (Retry.DEFAULT_ALLOWED_METHODS)
        for kind in ("redirect", "other"):
            kwargs.setdefault(kind, 0)
        kwargs.setdefault("backoff_factor", 1.0)
        kwargs.setdefault("backoff_max", OUTAGE_BACKOFF_MAX)
        kwargs.setdefault("raise_on_status", False)
        super().__init__(**kwargs)

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        if has_retry_after and status_code in self.DEFERRED:
            return True
        if status_code not in self.STORAGE_ERRORS or not self._is_method_retryable(method):
            return False
        return sum(entry.status in self.STORAGE_ERRORS for entry in self.history) < OUTAGE_SERVER_ERRORS

    def increment(self, method=None, url=None, response=None, error=None, _pool=None, _stacktrace=None):
        if error is not None and (self._is_connection_error(error)
                                  or (self._is_read_error(error) and self._is_method_retryable(method or ""))):
            record.add(f"{method} {url}: {error}")
        elif response is not None and response.status in self.DEFERRED:
            record.add(f"{method} {url}: HTTP {response.status}, Retry-After {response.headers.get('Retry-After')}")
        elif response is not None and response.status in self.STORAGE_ERRORS:
            record.add(f"{method} {url}: HTTP {response.status}")
        return super().increment(method, url, response, error, _pool, _stacktrace)
