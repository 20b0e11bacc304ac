"""Pod specs inside Kubernetes manifests (multi-document YAML), with the field path that reaches them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from numalab.model.errors import ValidationError

POD_SPEC_PATHS = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
"""Where each workload kind keeps its pod spec. Other kinds (Service, ConfigMap, ...) carry none."""


class ManifestError(ValueError):
    """A file that cannot be read as Kubernetes manifests; names the file (and document)."""


@dataclass(frozen=True)
class Workload:
    """One object that runs pods: where it came from, and its pod spec."""

    source: str
    document: int  # 1-based position in a multi-document file
    kind: str
    name: str
    namespace: str | None
    spec_path: str
    pod_spec: Mapping[str, Any] = field(repr=False)

    @property
    def object(self) -> str:
        return f"{self.kind}/{self.name}" if self.namespace is None else f"{self.kind}/{self.namespace}/{self.name}"


def load_documents(path: Path) -> list[Any]:
    """Every YAML document of a file (JSON is YAML too); empty documents are dropped."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ManifestError(f"{path}: cannot read: {reason}") from None
    try:
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ManifestError(f"{path}:{where}: not YAML: {problem}") from None


def workloads(source: str, documents: list[Any]) -> Iterator[Workload]:
    """Yield each workload of the documents; a kubectl `List` is opened; other kinds are skipped."""
    for number, doc in enumerate(documents, start=1):
        where = f"{source}: document {number}"
        if not isinstance(doc, Mapping):
            raise ManifestError(f"{where}: expected a Kubernetes object (a mapping), got {type(doc).__name__}")
        items = doc.get("items") if doc.get("kind") == "List" else [doc]
        if not isinstance(items, list):
            raise ManifestError(f"{where}: List.items is not a list")
        for item in items:
            workload = _workload(source, number, item)
            if workload is not None:
                yield workload


def _workload(source: str, number: int, obj: Any) -> Workload | None:
    if not isinstance(obj, Mapping):
        raise ManifestError(f"{source}: document {number}: expected a Kubernetes object, got {type(obj).__name__}")
    kind = obj.get("kind")
    if kind not in POD_SPEC_PATHS:
        return None
    metadata = obj.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise ValidationError(f"{source}: document {number}: metadata", "expected a mapping")
    name = str(metadata.get("name") or metadata.get("generateName") or "(unnamed)")
    namespace = metadata.get("namespace")
    spec: Any = obj
    walked: list[str] = []
    for key in POD_SPEC_PATHS[kind]:
        walked.append(key)
        spec = spec.get(key) if isinstance(spec, Mapping) else None
        if not isinstance(spec, Mapping):
            raise ValidationError(f"{source}: document {number}: {kind}/{name}: {'.'.join(walked)}",
                                  "missing or not a mapping")
    return Workload(source, number, kind, name, None if namespace is None else str(namespace),
                    ".".join(walked), spec)
