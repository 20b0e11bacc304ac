"""How a node's RKE2 config files reach its kubelet, and why numa-lab refuses user files that set the flags it
computes.

RKE2 reads config.yaml, then config.yaml.d/*.yaml in name order, and concatenates `kubelet-arg+` lists onto
the `kubelet-arg` before them (a plain `kubelet-arg` in a later file replaces the whole list). The kubelet then
parses the repeated flags one by one: `reserved-memory` entries accumulate (the same NUMA node given twice is
refused), map flags merge key by key, scalar flags take the last value. So a user's `reserved-memory` or
`kube-reserved` does not lose to numa-lab's drop-in: it adds to it or mixes into it, and the computed policy no
longer adds up. Such a file is refused before anything is written, naming the file and the flag, and so is a
plain `kubelet-arg` read after numa-lab's drop-in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from numalab.model.errors import ValidationError

ACCUMULATING_FLAGS = ("reserved-memory",)
MAP_FLAGS = ("kube-reserved", "system-reserved", "eviction-hard", "cpu-manager-policy-options",
             "topology-manager-policy-options", "feature-gates")
# The flags numa-lab writes from the node's topology (numalab.model.kubelet_policy), plus the whole
# topology-manager-* family.
MANAGED_FLAGS = ("cpu-manager-policy", "cpu-manager-policy-options", "reserved-cpus", "memory-manager-policy",
                 "reserved-memory", "kube-reserved", "system-reserved", "eviction-hard")
MANAGED_PREFIXES = ("topology-manager-",)
PLAIN_KEY = "kubelet-arg"


def flag_name(arg: str) -> str:
    """The flag a kubelet-arg entry sets: `kube-reserved=cpu=1` and `--kube-reserved=cpu=1` -> `kube-reserved`."""
    return arg.strip().lstrip("-").partition("=")[0].strip()


def is_managed(flag: str) -> bool:
    return flag in MANAGED_FLAGS or flag.startswith(MANAGED_PREFIXES)


def how_repeated(flag: str) -> str:
    """What the kubelet does with `flag` given twice."""
    if flag in ACCUMULATING_FLAGS:
        return "adds both up, and refuses a NUMA node given twice"
    if flag in MAP_FLAGS:
        return "merges both key by key"
    return "takes the last one"


def loaded_after(path: str, own: str) -> bool:
    """RKE2 reads `path` after `own`: both in config.yaml.d, `path` later by name (config.yaml comes first)."""
    mine, theirs = PurePosixPath(own), PurePosixPath(path)
    return theirs.parent == mine.parent and theirs.name > mine.name


def conflicts(files: Mapping[str, Mapping[str, Sequence[str]]], own: str) -> dict[str, list[str]]:
    """{file: what it does to the drop-in} for each file but `own`: the managed flags its kubelet-arg entries set,
    and a plain `kubelet-arg` read after `own`, which replaces the drop-in's whole list."""
    found: dict[str, list[str]] = {}
    for path, keys in files.items():
        if path == own:
            continue
        flags = dict.fromkeys(flag_name(arg) for args in keys.values() for arg in args)
        problems = [f"kubelet-arg sets {flag}: the kubelet {how_repeated(flag)}" for flag in flags if is_managed(flag)]
        if PLAIN_KEY in keys and loaded_after(path, own):
            problems.append(f"a plain {PLAIN_KEY} read after {PurePosixPath(own).name} replaces that file's whole "
                            f"list (use {PLAIN_KEY}+)")
        if problems:
            found[path] = problems
    return found


def check_user_kubelet_args(files: Mapping[str, Mapping[str, Sequence[str]]], own: str) -> None:
    """Refuse other files' kubelet-arg entries that would change what `own` (numa-lab's drop-in) sets; the
    error names the first such file (then any others) and each flag. `files` maps each RKE2 config file to its
    `kubelet-arg` / `kubelet-arg+` entries."""
    found = conflicts(files, own)
    if not found:
        return
    path, *others = sorted(found)
    more = "".join(f" Also {other}: " + "; ".join(found[other]) + "." for other in others)
    raise ValidationError(
        path,
        "; ".join(found[path]) + f". numa-lab computes the CPU, memory and topology manager flags and reservations "
        f"from the node's topology and writes them in {own}: change {path} (set those flags in the host's "
        f"kubelet_settings instead). Nothing was written.{more}",
    )
