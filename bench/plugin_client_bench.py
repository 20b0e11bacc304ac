"""numa-align's Kubernetes API client: RSS and start time of the hand-written one (plugin/numa_align/kubeapi.py)
against the official `kubernetes` client and lightkube, in one run. Prints figures and ratios, asserts nothing.

What is measured, the same for each client, in a fresh Python process per sample: the imports `numa-align
serve` needs to serve devices (grpc, the kubelet API stubs, prometheus-client, numa_align.running), then the
client's import, the kubeconfig read (HTTPS with a client certificate, as the systemd unit has it), the client
built, and the plugin's first two requests answered: its Node (for the owner uid) and its NodeResourceTopology
object. Start time: from the process being started to both answers in hand (interpreter start included).
RSS: VmRSS (and the peak, VmHWM) at that moment. "no client" is the same process without the last steps, so
each client's own share is its figure minus that one. The server is the fake API server of tests/plugin over
HTTPS on 127.0.0.1 (fakepki's CA and certificates). The plugin's goal: under 40 MiB RSS.

lightkube is not a dependency of numa-lab: give it in a venv of its own, made with the same Python minor
version as the one running this (`python -m venv /tmp/lk && /tmp/lk/bin/pip install lightkube`).
Usage: python bench/plugin_client_bench.py [--samples N] [--lightkube-venv DIR]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

# Only what a sample needs is imported at the top: the parent's modules (argparse, subprocess, statistics, the
# fake server) are imported where used, so they do not count in a sample's figures.
ROOT = Path(__file__).resolve().parents[1]

MIB = 1024 * 1024
NODE = "worker-1"
GOAL_MIB = 40
CLIENTS = ("no client", "hand-written", "kubernetes", "lightkube")


def child(which: str, kubeconfig: str) -> None:
    """One sample: import, read the kubeconfig, build the client, read the Node and the NRT object."""
    import grpc  # noqa: F401
    import prometheus_client  # noqa: F401
    from numa_align import running  # noqa: F401
    from numa_align.api import deviceplugin_v1beta1_pb2, podresources_v1_pb2  # noqa: F401
    from numa_align.nrt_api import GROUP, PLURAL, VERSION

    start = time.perf_counter()
    if which == "hand-written":
        from numa_align.kubeapi import KubeClient
        from numa_align.kubeconfig import read_kubeconfig
        imported = time.perf_counter()
        client = KubeClient(read_kubeconfig(Path(kubeconfig)))
        uid = client.get_node(NODE)["metadata"]["uid"]
        zones = client.get_nrt(NODE)["zones"]
    elif which == "kubernetes":
        from kubernetes import client as k8s
        from kubernetes import config
        imported = time.perf_counter()
        api = config.new_client_from_config(config_file=kubeconfig)
        uid = k8s.CoreV1Api(api).read_node(NODE).metadata.uid
        zones = k8s.CustomObjectsApi(api).get_cluster_custom_object(GROUP, VERSION, PLURAL, NODE)["zones"]
    elif which == "lightkube":
        from lightkube import Client, KubeConfig
        from lightkube.generic_resource import create_global_resource
        from lightkube.resources.core_v1 import Node
        imported = time.perf_counter()
        nrt = create_global_resource(GROUP, VERSION, "NodeResourceTopology", PLURAL)
        lightkube = Client(KubeConfig.from_file(kubeconfig), trust_env=False)
        uid = lightkube.get(Node, NODE).metadata.uid
        zones = lightkube.get(nrt, NODE)["zones"]
    else:
        imported, uid, zones = start, "", []
    answered = time.perf_counter()
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    print(json.dumps({"rss": int(fields["VmRSS"].split()[0]) * 1024, "hwm": int(fields["VmHWM"].split()[0]) * 1024,
                      "import": imported - start, "requests": answered - imported, "uid": uid, "zones": zones}),
          flush=True)


def sample(which: str, kubeconfig: Path, env: dict[str, str]) -> dict[str, float]:
    import subprocess

    started = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--child", which, str(kubeconfig)], capture_output=True,
                          text=True, env=env, timeout=120, check=False)
    ended = time.perf_counter()
    if done.returncode != 0:
        raise SystemExit(f"{which}: the sample failed (exit {done.returncode}): {done.stderr.strip()[-1500:]}")
    figures = json.loads(done.stdout.splitlines()[-1])
    if which != "no client" and figures["zones"] != []:
        raise SystemExit(f"{which}: read {figures['zones']!r}, not the NRT object the fake holds")
    return figures | {"start": ended - started}


def lightkube_env(venv: Path | None) -> tuple[dict[str, str] | None, str]:
    """The environment that puts the lightkube venv's packages first, and lightkube's version (or why not)."""
    import os

    if venv is None:
        return None, "not measured: give --lightkube-venv DIR (python -m venv DIR && DIR/bin/pip install lightkube)"
    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    found = sorted(site.glob("lightkube-*.dist-info"))
    if not found:
        return None, f"not measured: no lightkube in {site} (the venv's Python must be {sys.version.split()[0]})"
    return os.environ | {"PYTHONPATH": str(site)}, found[0].name.removesuffix(".dist-info").split("-", 1)[1]


def run(samples: int, lightkube_venv: Path | None) -> None:
    import base64
    import os
    import tempfile
    from importlib.metadata import version

    sys.path.insert(0, str(ROOT))  # the fake API server and its PKI live in the tests package

    from numa_align.kubeapi import KubeClient
    from numa_align.kubeconfig import ClusterConfig
    from numa_align.nrt_api import API_VERSION

    from tests.plugin.fakekube import FakeKube, kubeconfig_text, serve_kube
    from tests.plugin.fakepki import make_pki

    envs: dict[str, dict[str, str] | None] = dict.fromkeys(CLIENTS[:3], dict(os.environ))
    envs["lightkube"], lightkube_version = lightkube_env(lightkube_venv)
    labels = {"no client": "no client (device serving only)", "hand-written": "hand-written (kubeapi.py)",
              "kubernetes": f"kubernetes {version('kubernetes')}", "lightkube": f"lightkube {lightkube_version}"}
    results: dict[str, list[dict[str, float]]] = {which: [] for which in CLIENTS if envs[which] is not None}
    with tempfile.TemporaryDirectory(prefix="client-bench-") as work:
        pki = make_pki(Path(work) / "pki")
        fake = FakeKube(token="not-given")  # a request without the client certificate is answered 401
        fake.add_node(NODE)
        with serve_kube(fake, pki) as url:
            b64 = {name: base64.b64encode(pki.pem(name)).decode() for name in ("ca.crt", "client.crt", "client.key")}
            kubeconfig = Path(work) / "kubeconfig"
            kubeconfig.write_text(kubeconfig_text(url, {"client-certificate-data": b64["client.crt"],
                                                        "client-key-data": b64["client.key"]},
                                                  {"certificate-authority-data": b64["ca.crt"]}))
            KubeClient(ClusterConfig(server=url, source="bench", ca_file=pki.ca, cert_file=pki.directory / "client.crt",
                                     key_file=pki.directory / "client.key")).create_nrt(
                {"apiVersion": API_VERSION, "kind": "NodeResourceTopology", "metadata": {"name": NODE},
                 "zones": [], "attributes": []})
            for _ in range(samples):  # rounds interleaved, so drift on a shared machine hits every client alike
                for which, found in results.items():
                    found.append(sample(which, kubeconfig, envs[which]))  # type: ignore[arg-type]
    report(results, labels, samples)
    if envs["lightkube"] is None:
        print(f"  {labels['lightkube']}")


def report(results: dict[str, list[dict[str, float]]], labels: dict[str, str], samples: int) -> None:
    import statistics

    median = {which: {key: statistics.median(s[key] for s in found) for key in ("start", "import", "requests",
                                                                               "rss", "hwm")}
              for which, found in results.items()}
    base, own = median["no client"], median["hand-written"]
    print(f"numa-align's API client, {samples} fresh processes each (medians; HTTPS with a client certificate):")
    print(f"  {'':34} {'start':>8} {'import':>8} {'2 GETs*':>8} {'VmRSS':>10} {'VmHWM':>10} {'over no client':>15}")
    for which, m in median.items():
        print(f"  {labels[which]:34} {m['start'] * 1e3:5.0f} ms {m['import'] * 1e3:5.0f} ms "
              f"{m['requests'] * 1e3:5.0f} ms {m['rss'] / MIB:6.1f} MiB {m['hwm'] / MIB:6.1f} MiB "
              f"{(m['rss'] - base['rss']) / MIB:11.1f} MiB")
    print("  (start: process start to both answers; import: the client's modules; 2 GETs*: kubeconfig read, client "
          "built, Node and NRT object read)")
    print("  ratios to the hand-written client (start, VmRSS, RSS over no client):")
    for which, m in median.items():
        if which not in ("no client", "hand-written"):
            share = (m["rss"] - base["rss"]) / max(own["rss"] - base["rss"], 1)
            print(f"    {labels[which]:32} {m['start'] / own['start']:5.2f}x {m['rss'] / own['rss']:5.2f}x "
                  f"{share:6.1f}x")
    print(f"  ratio to the goal (VmRSS / {GOAL_MIB} MiB): " + ", ".join(
        f"{labels[which]} {m['rss'] / (GOAL_MIB * MIB):.2f}" for which, m in median.items() if which != "no client"))


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5, help="fresh processes per client (default 5)")
    parser.add_argument("--lightkube-venv", type=Path, help="a venv with lightkube installed, same Python minor")
    args = parser.parse_args()
    run(args.samples, args.lightkube_venv)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(*sys.argv[2:4])
    else:
        main()
