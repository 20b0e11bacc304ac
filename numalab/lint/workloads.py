"""Pod specs inside Kubernetes manifests (multi-document YAML), with the field path that reaches them
and the line each field path points at (findings name a line, as an editor wants)."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping, Sequence
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

STDIN = "-"
STDIN_SOURCE = "<stdin>"

_INDEX = re.compile(r"\[(\d+)\]")


class ManifestError(ValueError):
    """A file that cannot be read as Kubernetes manifests; names the file (and document)."""


@dataclass(frozen=True)
class Document:
    """One YAML document: its data and its node (which knows the lines)."""

    data: Any
    node: yaml.Node | None = field(repr=False)


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
    node: yaml.Node | None = field(default=None, repr=False, compare=False)

    @property
    def object(self) -> str:
        return f"{self.kind}/{self.name}" if self.namespace is None else f"{self.kind}/{self.namespace}/{self.name}"

    def line_of(self, path: str) -> int:
        """1-based line of the field path (e.g. spec.containers[0].resources.limits.cpu), or of the
        deepest part of it that exists (a missing limit points at its section)."""
        return 0 if self.node is None else line_of(self.node, path)


def line_of(node: yaml.Node, path: str) -> int:
    """Walk a field path through a YAML node tree to the line of its last key (or list item) that
    exists; keys may hold dots (example.com/gpu), so the longest key that fits is taken."""
    rest, line = path, node.start_mark.line
    while rest:
        if isinstance(node, yaml.SequenceNode) and (index := _INDEX.match(rest)):
            position = int(index.group(1))
            if position >= len(node.value):
                break
            node, rest = node.value[position], rest[index.end():].removeprefix(".")
            line = node.start_mark.line
            continue
        found = _child(node, rest) if isinstance(node, yaml.MappingNode) else None
        if found is None:
            break
        key_node, node = found
        rest = rest[len(str(key_node.value)):].removeprefix(".")
        line = key_node.start_mark.line
    return line + 1


def _child(node: yaml.MappingNode, rest: str) -> tuple[yaml.Node, yaml.Node] | None:
    best: tuple[yaml.Node, yaml.Node] | None = None
    for key_node, value_node in node.value:
        key = str(key_node.value)
        fits = rest == key or rest.startswith(key + ".") or rest.startswith(key + "[")
        if fits and (best is None or len(key) > len(str(best[0].value))):
            best = key_node, value_node
    return best


def source_name(path: Path) -> str:
    return STDIN_SOURCE if str(path) == STDIN else str(path)


def load_documents(path: Path) -> list[Document]:
    """Every YAML document of a file, or of standard input for `-` (JSON is YAML too); empty documents
    are dropped."""
    source = source_name(path)
    try:
        text = sys.stdin.read() if str(path) == STDIN else path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ManifestError(f"{source}: cannot read: {reason}") from None
    try:
        constructor = yaml.SafeLoader("")
        documents = [Document(constructor.construct_document(node), node)
                     for node in yaml.compose_all(text, Loader=yaml.SafeLoader)]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{mark.line + 1}:" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ManifestError(f"{source}:{where} not YAML: {problem}") from None
    return [doc for doc in documents if doc.data is not None]


def workloads(source: str, documents: Sequence[Document | Any]) -> Iterator[Workload]:
    """Yield each workload of the documents (read from a file, or objects built in code, which have
    no lines); a kubectl `List` is opened; other kinds are skipped."""
    for number, doc in enumerate(documents, start=1):
        where = f"{source}: document {number}"
        if not isinstance(doc, Document):
            doc = Document(doc, None)
        data = doc.data
        if not isinstance(data, Mapping):
            raise ManifestError(f"{where}: expected a Kubernetes object (a mapping), got {type(data).__name__}")
        if data.get("kind") == "List":
            items = data.get("items")
            if not isinstance(items, list):
                raise ManifestError(f"{where}: List.items is not a list")
            found = _child(doc.node, "items") if isinstance(doc.node, yaml.MappingNode) else None
            nodes = found[1].value if found and isinstance(found[1], yaml.SequenceNode) else [None] * len(items)
        else:
            items, nodes = [data], [doc.node]
        for item, node in zip(items, nodes, strict=True):
            workload = _workload(source, number, item, node)
            if workload is not None:
                yield workload


def _workload(source: str, number: int, obj: Any, node: yaml.Node | None) -> Workload | None:
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
                    ".".join(walked), spec, node)
