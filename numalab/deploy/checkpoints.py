"""The kubelet's manager checkpoints on a node: the ones that no longer match its machine (a CPU offline, a
cell's memory or hugepages changed, a file the kubelet cannot read) join the reset plan, so the safe reset
(drain, stop, remove, start, uncordon) brings the kubelet back; and the boot guard that does the same after
a reboot before the kubelet starts (numalab.checkpoint_guard) is put on the node as one archive."""

from __future__ import annotations

import ast
import importlib.util
import io
import zipfile
from pathlib import Path

from pyinfra import host
from pyinfra.operations import files

from numalab.checkpoint_guard import PROJECT_PACKAGES
from numalab.deploy import context
from numalab.deploy.facts import TextFile
from numalab.deploy.policy import host_sysfs
from numalab.model.components import KUBELET_GUARD
from numalab.model.kubelet import KubeletPolicy
from numalab.model.kubelet_checkpoints import (
    CPU_MANAGER_STATE,
    MEMORY_MANAGER_STATE,
    Machine,
    Mismatch,
    checkpoint_mismatches,
)
from numalab.model.kubelet_state import checkpoint_reservations
from numalab.progress import say

_MAIN = "from numalab.checkpoint_guard import main\n\nraise SystemExit(main())\n"
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the zip format's first date: the same archive on every run


def mismatched_checkpoints(policy: KubeletPolicy) -> list[Mismatch]:
    """This host's checkpoints the kubelet would refuse under `policy` on the machine it has now; each is
    said on the progress stream (node and reason), since it makes the node stage drain and reset the node."""
    texts = [host.get_fact(TextFile, path=path) or None for path in (CPU_MANAGER_STATE, MEMORY_MANAGER_STATE)]
    if not any(texts):
        return []
    found = checkpoint_mismatches(*texts, Machine.from_sysfs(host_sysfs()), **checkpoint_reservations(policy))
    for mismatch in found:
        say(f"{context.node_name(host)}: reset planned: {mismatch} (the kubelet would refuse it)")
    return found


def reset_files(policy_stale: list[str], policy: KubeletPolicy) -> list[str]:
    """The state files a node's reset removes: those a policy change made stale (`policy_stale`) and those that
    no longer match the machine, each once. Both the upstream node stage and RKE2's config stage plan with it."""
    return sorted({*policy_stale, *(mismatch.path for mismatch in mismatched_checkpoints(policy))})


def guard_archive() -> bytes:
    """numalab.checkpoint_guard and the modules it imports as a zip python3 runs (__main__.py calls it);
    byte for byte the same for the same sources, so a second run uploads nothing."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, text in [("__main__.py", _MAIN.encode()), *_module_files()]:
            entry = zipfile.ZipInfo(name, date_time=_EPOCH)
            entry.external_attr = 0o644 << 16
            archive.writestr(entry, text)
    return buffer.getvalue()


def put_guard():  # noqa: ANN201 - an OperationMeta
    """The boot guard archive the kubelet unit's ExecStartPre runs (components.kubelet_guard_command)."""
    return files.put(name="Kubelet boot guard (moves a checkpoint that no longer fits the machine aside)",
                     src=io.BytesIO(guard_archive()), dest=KUBELET_GUARD, mode="644", create_remote_dir=True)


def guard_modules(start: str = "numalab.checkpoint_guard") -> list[str]:
    """`start` and every module of PROJECT_PACKAGES it imports, at any depth and inside functions too, with
    their packages: found from the sources, so a module split elsewhere cannot leave the archive short."""
    found: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # a package's __init__ runs first
        for node in ast.walk(ast.parse(_source(name).read_bytes())):
            if isinstance(node, ast.Import):
                todo += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                todo += [node.module, *(f"{node.module}.{a.name}" for a in node.names
                                        if _is_module(f"{node.module}.{a.name}"))]
        todo = [n for n in todo if n.split(".")[0] in PROJECT_PACKAGES]
    return sorted(found)


def _module_files() -> list[tuple[str, bytes]]:
    files = []
    for name in guard_modules():
        spec = importlib.util.find_spec(name)
        inside = name.replace(".", "/") + ("/__init__.py" if spec.submodule_search_locations else ".py")
        files.append((inside, _source(name).read_bytes()))
    return files


def _is_module(name: str) -> bool:
    try:
        return name.split(".")[0] in PROJECT_PACKAGES and importlib.util.find_spec(name) is not None
    except ImportError:
        return False


def _source(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"the kubelet guard needs module {name}, which is not installed here")
    return Path(spec.origin)
