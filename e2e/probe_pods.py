"""Manifests of the pods the e2e suite creates: the probe script as each container's command.

Pure functions (plain dicts for the kubernetes client), so tests/ can check their QoS and lint them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from numa_align.devices import resource_name

PROBE_SCRIPT = (Path(__file__).parent / "probe.sh").read_text()
HOLD_SECONDS = 3600
"""How long a probe container stays up after printing, so the PodResources API still lists it."""
MEMORY = "64Mi"
SUITE_LABEL = "numa-lab.e2e/case"
RESTRICTED = {
    "runAsNonRoot": True,
    "runAsUser": 65534,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""Fits the `restricted` Pod Security level, which a hardened RKE2 may enforce on new namespaces."""


def dns_label(*parts: str) -> str:
    """A pod name from parts: lower case, [a-z0-9-], at most 63 characters."""
    text = re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")
    return text[:63].rstrip("-")


def probe_container(name: str, cpu: str, cpu_limit: str | None = None, numa_node: int | None = None,
                    devices: int = 1, hold: bool = True, image: str = "") -> dict[str, Any]:
    """A container that runs the probe; Guaranteed-shaped when cpu_limit is None (limits == requests)."""
    requests = {"cpu": cpu, "memory": MEMORY}
    limits = {"cpu": cpu_limit or cpu, "memory": MEMORY}
    if numa_node is not None:
        requests[resource_name(numa_node)] = str(devices)
        limits[resource_name(numa_node)] = str(devices)
    command = PROBE_SCRIPT + (f"\nsleep {HOLD_SECONDS}\n" if hold else "")
    return {
        "name": name,
        "image": image,
        "command": ["sh", "-c", command],
        "resources": {"requests": requests, "limits": limits},
        "securityContext": RESTRICTED,
    }


def probe_pod(name: str, worker: str, case: str, containers: list[dict[str, Any]],
              init_containers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A pod bound to one worker by its hostname label; never restarted, so a failure stays visible."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "nodeSelector": {"kubernetes.io/hostname": worker},
        "terminationGracePeriodSeconds": 0,
        "containers": containers,
    }
    if init_containers:
        spec["initContainers"] = init_containers
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {SUITE_LABEL: case}},
        "spec": spec,
    }


def devices_for(cpus: int, capacity_mode: str) -> int:
    """numa-align devices to request with `cpus` exclusive cpus: one slot, or one device per CPU."""
    return cpus if capacity_mode == "cpus" else 1


def pinned_pod(worker: str, node: int, image: str, capacity_mode: str, cpus: int = 1) -> dict[str, Any]:
    """Case 1: one Guaranteed container asking for numa-align/numa-<node>."""
    container = probe_container("probe", str(cpus), numa_node=node, devices=devices_for(cpus, capacity_mode),
                                image=image)
    return probe_pod(dns_label("pin", worker, f"n{node}"), worker, "pinned", [container])


def multi_container_pod(worker: str, node: int, image: str, capacity_mode: str, cpus: int = 1) -> dict[str, Any]:
    """Case 2: an anchoring init container and the app both ask for numa-<node>; a Guaranteed sidecar
    does not. Each asks `cpus` (a whole core under full-pcpus-only)."""
    devices = devices_for(cpus, capacity_mode)
    anchor = probe_container("anchor", str(cpus), numa_node=node, devices=devices, hold=False, image=image)
    app = probe_container("app", str(cpus), numa_node=node, devices=devices, image=image)
    sidecar = probe_container("sidecar", str(cpus), image=image)
    return probe_pod(dns_label("multi", worker, f"n{node}"), worker, "multi", [app, sidecar], [anchor])


def burstable_pod(worker: str, image: str) -> dict[str, Any]:
    """Case 3: a fractional CPU request below its limit: Burstable, so never pinned."""
    container = probe_container("probe", "100m", cpu_limit="500m", image=image)
    return probe_pod(dns_label("burst", worker), worker, "burstable", [container])


def exhaustion_pod(worker: str, node: int, cpus: int, image: str, capacity_mode: str) -> dict[str, Any]:
    """Case 4: more exclusive CPUs on numa-<node> than it has free."""
    container = probe_container("probe", str(cpus), numa_node=node, devices=devices_for(cpus, capacity_mode),
                                hold=False, image=image)
    return probe_pod(dns_label("exhaust", worker, f"n{node}"), worker, "exhaustion", [container])


# --- case 7: Services and cluster DNS ------------------------------------------------------------
# The probe image is Debian's static busybox: its `nslookup` has its own resolver (reads the pod's
# resolv.conf, asks the cluster DNS), while its `wget` crashes on any lookup without glibc's NSS modules,
# so the client resolves with nslookup and then speaks HTTP with `nc` to the address it got.

SERVICE_CASE = "service-dns"
SERVICE = "dns-echo"
PORT, TARGET_PORT = 80, 8080
APP_LABEL = "numa-lab.e2e/app"
ATTEMPTS = 60
"""The client asks every 2 s for up to two minutes: the endpoint and the DNS record appear within seconds."""
_ADDRESS = re.compile(r"^ADDRESS (\S+)$", re.M)
_BODY = re.compile(r"^BODY (\S+)$", re.M)


def service_name(namespace: str, domain: str = "cluster.local") -> str:
    return f"{SERVICE}.{namespace}.svc.{domain}"


def _service_case_pod(name: str, worker: str, container: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {SUITE_LABEL: SERVICE_CASE, **labels}},
        "spec": {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": worker},
                 "terminationGracePeriodSeconds": 0, "containers": [container]},
    }


def _service_case_container(name: str, image: str, script: str) -> dict[str, Any]:
    """Burstable (a little CPU, no limit): never pinned, so it takes no CPU a pinned case needs."""
    return {"name": name, "image": image, "command": ["sh", "-c", script],
            "resources": {"requests": {"cpu": "50m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}},
            "securityContext": RESTRICTED}


def backend_pod(worker: str, image: str, token: str) -> dict[str, Any]:
    """busybox httpd serving `token` on TARGET_PORT as user nobody."""
    script = (f"mkdir -p /tmp/www && echo {token} > /tmp/www/index.html && "
              f"exec httpd -f -p {TARGET_PORT} -h /tmp/www")
    container = _service_case_container("httpd", image, script)
    return _service_case_pod(f"{SERVICE}-backend", worker, container, {APP_LABEL: SERVICE})


def service(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": namespace, "labels": {SUITE_LABEL: SERVICE_CASE}},
        "spec": {"selector": {APP_LABEL: SERVICE},
                 "ports": [{"port": PORT, "targetPort": TARGET_PORT, "protocol": "TCP"}]},
    }


def client_pod(worker: str, image: str, name: str) -> dict[str, Any]:
    """Resolves `name`, fetches / from the address it got and, once that answers 200, prints `ADDRESS <ip>`
    and `BODY <last line>` and exits 0; exit 1 after ATTEMPTS tries (the last nslookup and nc output stay in
    the log). Until the backend is ready kube-proxy rejects the Service's address (net unreachable)."""
    script = f"""
i=0
while [ $i -lt {ATTEMPTS} ]; do
  i=$((i+1))
  answer=$(nslookup -type=a {name} 2>&1)
  address=$(echo "$answer" | sed -n '/^Name:/,$ s/^Address:[[:space:]]*//p' | head -n 1)
  if [ -n "$address" ]; then
    reply=$(printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 "$address" {PORT} 2>&1)
    case "$reply" in
      "HTTP/1."*" 200 "*) echo "ADDRESS $address"; echo "BODY $(echo "$reply" | tail -n 1)"; exit 0 ;;
    esac
  fi
  sleep 2
done
echo "nslookup said: $answer"
echo "nc said: $reply"
exit 1
"""
    return _service_case_pod(f"{SERVICE}-client", worker, _service_case_container("client", image, script), {})


def judge(log: str, token: str, cluster_ip: str) -> tuple[bool, str]:
    """The client reached the backend through the Service's address, found by its name."""
    address, body = _ADDRESS.search(log), _BODY.search(log)
    if address is None or body is None:
        return False, "no answer: " + " ".join(log.split())[-300:]
    problems = []
    if address.group(1) != cluster_ip:
        problems.append(f"the name resolved to {address.group(1)}, not the Service's clusterIP {cluster_ip}")
    if body.group(1) != token:
        problems.append(f"the answer was {body.group(1)!r}, not the backend's {token!r}")
    return not problems, "; ".join(problems) or f"resolved to {cluster_ip}, answered {token}"
