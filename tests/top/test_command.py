"""`numalab top` and `kubectl numa` end to end, with a fake API source or a kubeconfig that leads nowhere."""

import json
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import urllib3
from kubernetes.client.rest import ApiException
from numa_align.nrt_api import CRD_NAME

from numalab.cli import main
from numalab.top import command
from numalab.top.source import ApiSource
from tests.top.fakes import FakeSource, sample_cluster

ROOT = Path(__file__).resolve().parents[2]
CRD_MESSAGE = f"the NodeResourceTopology CRD ({CRD_NAME}) is not installed: deploy with numa_align_nrt on"


@pytest.fixture
def fake(monkeypatch):
    source = FakeSource(*sample_cluster())
    opened = []

    def open_source(kubeconfig, context):
        opened.append((kubeconfig, context))
        return source

    monkeypatch.setattr(command, "open_source", open_source)
    source.opened = opened
    return source


def serve(monkeypatch, source):
    monkeypatch.setattr(command, "open_source", lambda kubeconfig, context: source)


def run(capsys, *argv, entry=main):
    code = entry(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


class Failing:
    """A kubernetes API object whose every call raises `error`."""

    def __init__(self, error):
        self.error = error

    def __getattr__(self, name):
        def call(*args, **kwargs):
            raise self.error
        return call


class Items:
    def __init__(self, items):
        self.items = items


class Core:
    def list_node(self, **kwargs):
        return Items([{"metadata": {"name": "worker-1"}}])

    def list_pod_for_all_namespaces(self, **kwargs):
        return Items([])


def test_table(fake, capsys, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", "/somewhere/kubeconfig")
    code, out, err = run(capsys, "top")
    assert (code, err) == (0, "")
    assert fake.opened == [("/somewhere/kubeconfig", None)]
    assert "worker-1  topology manager: single-numa-node, scope pod" in out
    assert "default/pinned-a: cpus 1-2, mem 2Gi, numa-0×1" in out
    assert "warning: stale NodeResourceTopology worker-3" in out


def test_json_and_node_filter(fake, capsys):
    code, out, err = run(capsys, "top", "--kubeconfig", "kc", "--node", "worker-2", "--format", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["version"] == 1 and [n["name"] for n in doc["nodes"]] == ["worker-2"]
    assert [c["zone"] for c in doc["nodes"][0]["cells"]] == ["node-0", "node-2", "node-3"]
    assert fake.pod_node_asked == ["worker-2"]


def test_unknown_node_exits_2(fake, capsys):
    code, out, err = run(capsys, "top", "--kubeconfig", "kc", "--node", "nope")
    assert (code, out) == (2, "")
    assert err == "numalab top: --node nope: no such Node and no NodeResourceTopology for it\n"


def test_writes_svg_and_html(fake, capsys, tmp_path):
    svg, page = tmp_path / "top.svg", tmp_path / "top.html"
    code, out, err = run(capsys, "top", "--kubeconfig", "kc", "--svg", str(svg), "--html", str(page))
    assert (code, err) == (0, "")
    assert ET.parse(svg).getroot().tag.endswith("svg")
    assert "<svg " in page.read_text() and "<table>" in page.read_text()


def test_unwritable_file_exits_2(fake, capsys, tmp_path):
    code, out, err = run(capsys, "top", "--kubeconfig", "kc", "--svg", str(tmp_path / "no" / "dir.svg"))
    assert (code, out) == (2, "") and err.startswith(f"numalab top: cannot write {tmp_path / 'no' / 'dir.svg'}:")


def test_crd_missing(monkeypatch, capsys):
    serve(monkeypatch, ApiSource(Failing(ApiException(status=404, reason="Not Found")), Core(), "https://api:6443"))
    code, out, err = run(capsys, "top", "--kubeconfig", "kc")
    assert (code, out, err) == (2, "", f"numalab top: {CRD_MESSAGE}\n")


def test_forbidden_and_unreachable(monkeypatch, capsys):
    serve(monkeypatch, ApiSource(Failing(ApiException(status=403, reason="Forbidden")), Core(), "https://api:6443"))
    code, out, err = run(capsys, "top", "--kubeconfig", "kc")
    assert (code, err) == (2, "numalab top: API server https://api:6443 refused to list NodeResourceTopology "
                              "objects: 403 Forbidden\n")
    refused = urllib3.exceptions.MaxRetryError(None, "/apis", reason=ConnectionRefusedError("refused"))
    serve(monkeypatch, ApiSource(Failing(refused), Core(), "https://api:6443"))
    code, out, err = run(capsys, "top", "--kubeconfig", "kc")
    assert code == 2 and err.startswith("numalab top: no API server answers at https://api:6443: ")
    assert err.count("\n") == 1


def test_missing_kubeconfig_names_the_lab_default(monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("NUMALAB_STATE_DIR", str(tmp_path / "state"))
    code, out, err = run(capsys, "top")
    assert (code, out) == (2, "")
    assert err.startswith(f"numalab top: kubeconfig {tmp_path / 'state' / 'kubeconfig'} does not exist")
    assert err.count("\n") == 1


def test_unloadable_kubeconfig(capsys, tmp_path):
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: [\n")
    code, out, err = run(capsys, "top", "--kubeconfig", str(bad))
    assert code == 2 and err.startswith(f"numalab top: kubeconfig {bad} cannot be loaded: ")
    assert err.count("\n") == 1


def test_unreachable_api_server_through_a_real_client(capsys, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n")
    code, out, err = run(capsys, "top", "--kubeconfig", str(kubeconfig))
    assert (code, out) == (2, "")
    assert err.startswith(f"numalab top: no API server answers at https://127.0.0.1:9 (kubeconfig {kubeconfig}): ")
    assert err.count("\n") == 1


def test_kubectl_plugin_runs_the_same_command(fake, capsys, monkeypatch):
    code, out, err = run(capsys, "--kubeconfig", "kc", "--format", "json", entry=command.kubectl_main)
    assert (code, err) == (0, "")
    assert [n["name"] for n in json.loads(out)["nodes"]] == ["server", "worker-1", "worker-2", "worker-3"]
    code, out, err = run(capsys, "--kubeconfig", "kc", "--node", "nope", entry=command.kubectl_main)
    assert (code, err) == (2, "kubectl numa: --node nope: no such Node and no NodeResourceTopology for it\n")


def test_kubectl_numa_console_script_is_declared():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-numa"] == "numalab.top.command:kubectl_main"
