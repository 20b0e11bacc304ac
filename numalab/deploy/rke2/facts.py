"""Facts the RKE2 stages read: the kubelet-arg entries already in the node's RKE2 config files."""

from __future__ import annotations

import re
import shlex
from typing import Any

import yaml
from pyinfra.api import FactBase

KUBELET_ARG_KEYS = ("kubelet-arg", "kubelet-arg+")
FILE_MARK = "==> numa-lab: rke2 config file "
# Prints the top-level kubelet-arg / kubelet-arg+ blocks of a YAML file and nothing else (config.yaml holds the
# join token): a line at column 0 that is not a comment or a list item starts a key, which is kept or not.
_BLOCKS = r"/^[^[:space:]#-]/ { keep = ($0 ~ /^[^[:alnum:]]?kubelet-arg\+?[^[:alnum:]:]?[[:space:]]*:/) } keep"
_LIST_ITEM = re.compile(r"""^\s*-\s*["']?(.*?)["']?\s*$""")


class Rke2KubeletArgs(FactBase[dict[str, dict[str, list[str]]]]):
    """
    The `kubelet-arg` and `kubelet-arg+` entries of each RKE2 config file under ``config_dir``: config.yaml,
    then config.yaml.d/*.yaml and *.yml, any case, as RKE2 reads them (numa-lab's own drop-in included).
    Files without them are left out.

    .. code:: python

        {"/etc/rancher/rke2/config.yaml.d/10-site.yaml": {"kubelet-arg+": ["kube-reserved=cpu=500m"]}}
    """

    default = dict

    def command(self, config_dir: str) -> str:
        directory = shlex.quote(config_dir)
        files = " ".join(f"{directory}/{name}" for name in ("config.yaml", "config.yaml.d/*.[yY][aA][mM][lL]",
                                                             "config.yaml.d/*.[yY][mM][lL]"))
        show = f"echo {shlex.quote(FILE_MARK)}\"$f\"; awk {shlex.quote(_BLOCKS)} \"$f\""
        return f"for f in {files}; do [ -f \"$f\" ] || continue; {show}; done; true"

    def process(self, output: list[str]) -> dict[str, dict[str, list[str]]]:
        blocks: dict[str, list[str]] = {}
        lines: list[str] = []
        for line in output:
            if line.startswith(FILE_MARK):
                lines = blocks.setdefault(line.removeprefix(FILE_MARK), [])
            else:
                lines.append(line)
        found = {path: kubelet_args("\n".join(text)) for path, text in blocks.items()}
        return {path: keys for path, keys in found.items() if keys}


def kubelet_args(text: str) -> dict[str, list[str]]:
    """{key: entries} of the kubelet-arg keys in `text` (an empty list kept: a plain one still replaces). YAML that
    RKE2 could not read either is taken line by line, its list items counted as `kubelet-arg+`."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        items = [match.group(1) for line in text.splitlines() if (match := _LIST_ITEM.match(line))]
        return {"kubelet-arg+": items} if items else {}
    if not isinstance(document, dict):
        return {}
    return {key: [str(arg) for arg in _as_list(document[key])] for key in KUBELET_ARG_KEYS if key in document}


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]
