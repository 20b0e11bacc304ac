"""Stage `cluster_dns` (the control-plane host, distribution upstream): CoreDNS behind the cluster DNS
Service, from the image the registry stage pushed (numalab.images.lab_images, key `coredns`).

Applied only when the rendered manifest's checksum differs from the live Deployment's, and waited for until
rolled out at the end of the run (`cluster_dns_rolled_out`); a second run with nothing changed applies and waits
for nothing. RKE2 ships its own.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.operations import python

from numalab.deploy import api, context, controller, manifests
from numalab.images.lab_images import lab_images, select_images
from numalab.model.cluster import CLUSTER_DOMAIN, Cluster

NAMESPACE = "kube-system"
NAME = "coredns"
TEMPLATE = "k8s/coredns.yaml.j2"
REPLICAS = 1  # the lab's workers are small; one replica answers every pod (a restart is a short outage)
MEMORY_REQUEST, MEMORY_LIMIT = "70Mi", "170Mi"  # CoreDNS's own manifest's values
ROLLOUT_TIMEOUT = 300.0


def coredns_manifest(cluster: Cluster, image: str) -> str:
    return manifests.checksummed(
        TEMPLATE, namespace=NAMESPACE, image=image, dns_ip=str(cluster.dns_service_ip), domain=CLUSTER_DOMAIN,
        replicas=REPLICAS, memory_request=MEMORY_REQUEST, memory_limit=MEMORY_LIMIT,
    )


def coredns_image(cluster: Cluster, kubernetes_version: str) -> str:
    if cluster.registry_endpoint is None:
        raise DeployError("no registry host: the lab's CoreDNS image is served by the `registry` group")
    (image,) = select_images(lab_images(kubernetes_version), ["coredns"])
    return f"{cluster.registry_endpoint}/{image.name}"


def live_checksum(kubeconfig) -> str | None:  # noqa: ANN001 - a Path
    """The manifest checksum on the live Deployment, or None (absent, or no API)."""
    try:
        apps = api.client.AppsV1Api(api.core_api(kubeconfig).api_client)
        found = apps.read_namespaced_deployment(NAME, NAMESPACE, _request_timeout=5)
    except api.Problem:
        return None
    return (found.metadata.annotations or {}).get(manifests.MANIFEST_CHECKSUM)


@deploy("cluster_dns")
def cluster_dns() -> bool:
    """CoreDNS's ServiceAccount, RBAC, Corefile, Deployment and the kube-dns Service at the cluster DNS IP.
    Returns whether its rollout is still to come: `cluster_dns_rolled_out` waits for it at the end of the run,
    so its pod starts on a worker while the later stages run (on a first run about a minute under emulation)."""
    cluster = context.cluster_of(host)
    kubeconfig = context.state_dir(host) / "kubeconfig"
    text = coredns_manifest(cluster, coredns_image(cluster, controller.binaries(host).version))
    same = live_checksum(kubeconfig) == manifests.manifest_checksum(text, "Deployment")
    if same and api.deployment_ready(kubeconfig, NAMESPACE, NAME):
        host.noop(f"CoreDNS runs this manifest and is rolled out (Service at {cluster.dns_service_ip})")
        return False
    if not same:
        python.call(name=f"Apply CoreDNS and the kube-dns Service at {cluster.dns_service_ip}",
                    function=manifests.apply, kubeconfig=kubeconfig, text=text)
    return True


@deploy("cluster_dns_rolled_out")
def cluster_dns_rolled_out() -> None:
    """Wait until the CoreDNS Deployment `cluster_dns` applied (or found not ready) is rolled out."""
    python.call(name="Wait until CoreDNS is rolled out", function=api.wait_deployment_ready,
                kubeconfig=context.state_dir(host) / "kubeconfig", namespace=NAMESPACE, deployment=NAME,
                timeout=ROLLOUT_TIMEOUT)
