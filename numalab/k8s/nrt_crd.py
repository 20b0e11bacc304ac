"""The NodeResourceTopology CRD, as its API module ships it: no GitHub download is reachable, the Go module
proxy is.

github.com/k8stopologyawareschedwg/noderesourcetopology-api carries `manifests/crd.yaml` in its module zip
(the CRD the scheduler plugin and the reference exporters are built against: group topology.node.k8s.io,
cluster-scoped, v1alpha2 stored). `go mod download` puts the module in the Go module cache once; later calls
read it from there. The file is checked to be that CRD before anything applies it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import yaml
from numa_align.nrt_api import CRD_NAME, GROUP, VERSION

from numalab.k8s.errors import BinariesError
from numalab.k8s.source import SourceError, download_module

NRT_API_MODULE = "github.com/k8stopologyawareschedwg/noderesourcetopology-api"
NRT_API_VERSION = "v0.1.3"
CRD_FILE = "manifests/crd.yaml"


def crd_problem(crd: Any) -> str | None:
    """Why `crd` is not the NodeResourceTopology CRD serving v1alpha2 cluster-wide, or None."""
    if not isinstance(crd, dict) or crd.get("kind") != "CustomResourceDefinition":
        return "it is not a CustomResourceDefinition"
    name = (crd.get("metadata") or {}).get("name")
    if name != CRD_NAME:
        return f"it defines {name!r}, not {CRD_NAME}"
    spec = crd.get("spec") or {}
    if spec.get("group") != GROUP or spec.get("scope") != "Cluster":
        return f"its group/scope is {spec.get('group')!r}/{spec.get('scope')!r}, not {GROUP}/Cluster"
    served = [v.get("name") for v in spec.get("versions") or [] if v.get("served")]
    if VERSION not in served:
        return f"it serves {served}, not {VERSION}"
    return None


def nrt_crd(environ: Mapping[str, str] | None = None, version: str = NRT_API_VERSION) -> dict[str, Any]:
    """The CRD object from the API module at `version`, downloaded into the Go module cache if needed."""
    env = dict(os.environ if environ is None else environ)
    where = f"{NRT_API_MODULE}@{version}"
    try:
        module = download_module(version, env, module=NRT_API_MODULE)
    except SourceError as exc:
        raise BinariesError(f"the NodeResourceTopology CRD: {exc}") from None
    path = module.directory / CRD_FILE
    try:
        documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    except (OSError, yaml.YAMLError) as exc:
        raise BinariesError(f"{where}: cannot read {CRD_FILE}: {exc}") from None
    if len(documents) != 1:
        raise BinariesError(f"{where}: {CRD_FILE} holds {len(documents)} objects, expected the one CRD")
    problem = crd_problem(documents[0])
    if problem:
        raise BinariesError(f"{where}: {CRD_FILE} is refused: {problem}")
    return documents[0]
