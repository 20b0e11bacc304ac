"""The plugin's Kubernetes API client: kubeconfig and in-cluster configuration, HTTPS with the cluster's CA
and a client certificate, and each failure's message (CRD missing, 401, 403, unreachable, timeout)."""

from __future__ import annotations

import base64
import json
import socket
import tempfile
from pathlib import Path

import pytest
from numa_align.kubeapi import ApiError, CrdMissing, KubeClient, NotFound, Unreachable
from numa_align.kubeconfig import ClusterConfig, ConfigError, in_cluster_config, load_config, read_kubeconfig
from numa_align.nrt_api import API_VERSION, CRD_NAME, GROUP, PLURAL, VERSION

from tests.plugin.fakekube import FakeKube, kubeconfig_text, serve_kube
from tests.plugin.fakepki import make_pki

NRT = {"apiVersion": API_VERSION, "kind": "NodeResourceTopology",
       "metadata": {"name": "worker-1"}, "zones": [], "attributes": []}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture
def fake() -> FakeKube:
    fake = FakeKube(token="s3cret")
    fake.add_node("worker-1")
    return fake


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_kubeconfig_token_reaches_the_server_and_a_wrong_one_is_named(tmp_path, fake):
    with serve_kube(fake) as url:
        good = read_kubeconfig(write(tmp_path / "good", kubeconfig_text(url, {"token": "s3cret"})))
        assert (good.server, good.token, good.cert_data) == (url, "s3cret", None)
        assert KubeClient(good).get_node("worker-1")["metadata"]["uid"] == fake.nodes["worker-1"]
        bad = read_kubeconfig(write(tmp_path / "bad", kubeconfig_text(url, {"token": "old"})))
        with pytest.raises(ApiError, match=rf"401 Unauthorized: the API server at {url} did not accept a bearer "
                                           rf"token \(kubeconfig {tmp_path}/bad, context numa-align@fake, user "
                                           r"numa-align\)") as caught:
            KubeClient(bad).get_node("worker-1")
    assert caught.value.status == 401
    assert [who for _m, _p, who in fake.seen] == ["token s3cret", "token old"]


def test_a_token_file_is_read_on_every_request(tmp_path, fake):
    token = write(tmp_path / "token", "s3cret\n")
    with serve_kube(fake) as url:
        client = KubeClient(read_kubeconfig(write(tmp_path / "kc", kubeconfig_text(url, {"tokenFile": "token"}))))
        client.get_node("worker-1")
        token.write_text("rotated")
        with pytest.raises(ApiError, match="401"):
            client.get_node("worker-1")
    assert [who for _m, _p, who in fake.seen] == ["token s3cret", "token rotated"]


def test_client_certificate_data_over_https_with_the_clusters_ca(tmp_path, fake, monkeypatch):
    pytest.importorskip("cryptography")
    pki = make_pki(tmp_path / "pki")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with serve_kube(fake, pki) as url:
        text = kubeconfig_text(url, {"client-certificate-data": b64(pki.pem("client.crt")),
                                     "client-key-data": b64(pki.pem("client.key"))},
                               {"certificate-authority-data": b64(pki.pem("ca.crt"))})
        config = read_kubeconfig(write(tmp_path / "kc", text))
        client = KubeClient(config)
        assert list(scratch.iterdir()) == []  # the key was on disk only while it loaded
        created = client.create_nrt(NRT)
        assert created["metadata"]["resourceVersion"] and client.get_nrt("worker-1")["zones"] == []
        files = read_kubeconfig(write(tmp_path / "files", kubeconfig_text(
            url, {"client-certificate": "pki/client.crt", "client-key": "pki/client.key"},
            {"certificate-authority": "pki/ca.crt"})))
        assert files.ca_file == tmp_path / "pki/ca.crt"
        KubeClient(files).get_node("worker-1")
        other = make_pki(tmp_path / "other")
        stranger = ClusterConfig(server=url, source="test", ca_file=other.ca)
        with pytest.raises(Unreachable, match=rf"the API server at {url} has a certificate that does not verify"):
            KubeClient(stranger).get_node("worker-1")
    assert {who for _m, _p, who in fake.seen} == {"cert system:node:worker-1"}


def test_a_json_kubeconfig_and_insecure_skip_tls_verify(tmp_path):
    document = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
                "clusters": [{"name": "k", "cluster": {"server": "https://10.0.0.1:6443/",
                                                       "insecure-skip-tls-verify": True}}],
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                "users": [{"name": "u", "user": {"token": "t"}}]}
    config = read_kubeconfig(write(tmp_path / "kc.json", json.dumps(document)))
    assert (config.server, config.insecure, config.token) == ("https://10.0.0.1:6443", True, "t")
    assert not config.ssl_context().check_hostname


def _bad_kubeconfigs(tmp_path: Path) -> list[tuple[str, str]]:
    url = "https://10.0.0.1:6443"
    good = kubeconfig_text(url, {"token": "t"})
    return [
        ("clusters:\n- cluster:\n\tserver: https://x\n", "is not YAML: line 3, column 1: .*found character"),
        ("current-context: c\n", r"no contexts entry named 'c'"),
        (good.replace("current-context: numa-align@fake", "current-context: ''"), "has no current-context"),
        (good.replace("user: numa-align\n  name", "user: nobody\n  name"), "no users entry named 'nobody'"),
        (kubeconfig_text("10.0.0.1:6443"), r"cluster server '10.0.0.1:6443' is not an https://"),
        (kubeconfig_text(url, {"exec": "\n      command: aws"}), "authenticates with exec, which numa-align"),
        (kubeconfig_text(url, {"username": "admin", "password": "x"}),
         "authenticates with username, password, which numa-align does not do"),
        (kubeconfig_text(url, {"client-certificate-data": "not base64!"}), "client-certificate-data is not base64"),
        (kubeconfig_text(url, {"client-certificate": "missing.crt"}), rf"client-certificate {tmp_path}/missing.crt "
                                                                      "does not exist"),
        (kubeconfig_text(url, {"client-certificate-data": b64(b"junk"), "client-key-data": b64(b"junk")}),
         "the client certificate and key .* do not load"),
        (kubeconfig_text(url, {"client-certificate-data": b64(b"junk")}), "a client certificate without a client key"),
        (kubeconfig_text(url, cluster={"certificate-authority-data": b64(b"junk")}),
         "the certificate authority .* does not load"),
        ("- a\n- b\n", "is not a mapping"),
    ]


def test_every_bad_kubeconfig_is_a_config_error_naming_the_file(tmp_path):
    path = tmp_path / "kubeconfig"
    for text, words in _bad_kubeconfigs(tmp_path):
        path.write_text(text)
        with pytest.raises(ConfigError, match=words) as caught:
            KubeClient(read_kubeconfig(path))
        assert str(path) in str(caught.value), text
    with pytest.raises(ConfigError, match=f"cannot read kubeconfig {tmp_path}/none: No such file"):
        read_kubeconfig(tmp_path / "none")


def test_in_cluster_configuration_from_the_service_account(tmp_path):
    account = tmp_path / "serviceaccount"
    account.mkdir()
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(ConfigError, match=f"{account}/token does not exist: mount the service account token"):
        in_cluster_config(env, account)
    write(account / "token", "first\n")
    write(account / "ca.crt", "")
    config = load_config(None, env, account)
    assert (config.server, config.ca_file, config.bearer_token()) == ("https://10.96.0.1:443", account / "ca.crt",
                                                                      "first")
    write(account / "token", "rotated\n")
    assert config.bearer_token() == "rotated"
    assert "the token in" in config.credentials and "in-cluster service account" in config.credentials
    v6 = in_cluster_config({"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}, account)
    assert v6.server == "https://[fd00::1]:443"
    with pytest.raises(ConfigError, match="no kubeconfig given and not in a pod"):
        load_config(None, {}, account)


def test_crd_missing_absent_objects_and_forbidden_verbs(tmp_path, fake):
    with serve_kube(fake) as url:
        client = KubeClient(ClusterConfig(server=url, source="test kubeconfig", token="s3cret"))
        with pytest.raises(NotFound, match=f"{CRD_NAME} 'worker-1' not found"):
            client.get_nrt("worker-1")
        with pytest.raises(NotFound, match="nodes 'worker-9' not found"):
            client.get_node("worker-9")
        fake.crd_installed = False
        for call in (lambda: client.get_nrt("worker-1"), lambda: client.create_nrt(NRT)):
            with pytest.raises(CrdMissing, match=rf"does not serve /apis/{GROUP}/{VERSION}/{PLURAL}: the "
                                                 rf"NodeResourceTopology CRD \({CRD_NAME}\) is not installed"):
                call()
        fake.crd_installed = True
        fake.forbidden = {"create"}
        with pytest.raises(ApiError, match=rf"a bearer token \(test kubeconfig\) may not create {PLURAL}"
                                           rf".*cannot create resource.*grant 'create' on {PLURAL}"):
            client.create_nrt(NRT)


def test_an_unreachable_server_is_named_with_its_address():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    client = KubeClient(ClusterConfig(server=f"http://127.0.0.1:{port}", source="test"))
    with pytest.raises(Unreachable, match=rf"cannot reach the API server at http://127.0.0.1:{port}: Connection "
                                          "refused"):
        client.get_node("worker-1")
    with socket.socket() as silent:  # accepts (the kernel does) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(Unreachable, match=rf"the API server at {url} did not answer within 0.2 s"):
            KubeClient(ClusterConfig(server=url, source="test"), timeout=0.2).get_node("worker-1")


def test_one_tls_connection_carries_every_request_and_a_dropped_one_is_reopened(tmp_path, fake):
    pki = make_pki(tmp_path / "pki")
    with serve_kube(fake, pki) as url:
        client = KubeClient(ClusterConfig(server=url, source="test", ca_file=pki.ca, token="s3cret"))
        client.create_nrt(NRT)
        for _ in range(20):
            client.get_node("worker-1")
            client.get_nrt("worker-1", cached=True)
        with pytest.raises(NotFound):
            client.get_nrt("worker-9")  # an error answer keeps the connection too
        assert (len(fake.seen), fake.connections) == (42, 1)  # one TLS handshake for 42 requests
        fake.drop_connections()  # the server closed it while idle: sent again on a new one, once
        assert client.get_node("worker-1")["metadata"]["uid"] == fake.nodes["worker-1"]
        assert fake.connections == 2
    with pytest.raises(Unreachable):  # the server is gone: no endless retry, and no connection kept
        client.get_node("worker-1")
    assert client._connection is None


def test_the_running_pods_of_a_node_are_listed_whole_for_the_auditor_and_a_missing_right_is_named(fake):
    fake.set_pod("default", "web", "worker-1")
    fake.set_pod("numa", "stuck", "worker-1", phase="Pending")
    fake.set_pod("default", "elsewhere", "worker-2")
    with serve_kube(fake) as url:
        client = KubeClient(ClusterConfig(server=url, source="test kubeconfig", token="s3cret"))
        [pod] = client.running_pod_objects("worker-1")
        assert (pod["metadata"]["namespace"], pod["metadata"]["name"], pod["status"]["phase"]) == (
            "default", "web", "Running")
        fake.forbidden_resources = {"pods"}
        with pytest.raises(ApiError, match=r"may not list pods.*grant 'list' on pods") as caught:
            client.running_pod_objects("worker-1")
    assert caught.value.status == 403
    method, path, _who = fake.seen[0]
    assert path == "/api/v1/pods?fieldSelector=spec.nodeName%3Dworker-1%2Cstatus.phase%3DRunning&resourceVersion=0"


def test_an_event_is_created_in_its_namespace_and_a_taken_name_or_missing_right_is_an_api_error(fake):
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "worker-1.x-0", "namespace": "default"},
             "reason": "R", "message": "m", "involvedObject": {"kind": "Node", "name": "worker-1"}}
    with serve_kube(fake) as url:
        client = KubeClient(ClusterConfig(server=url, source="test kubeconfig", token="s3cret"))
        assert client.create_event(event)["metadata"]["name"] == "worker-1.x-0"
        with pytest.raises(ApiError, match="409 AlreadyExists") as taken:
            client.create_event(event)
        fake.forbidden_resources = {"events"}
        with pytest.raises(ApiError, match=r"may not create events.*grant 'create' on events") as refused:
            client.create_event(event)
    assert (taken.value.status, refused.value.status) == (409, 403)
    assert fake.events == {("default", "worker-1.x-0"): event}
    assert fake.seen[0][:2] == ("POST", "/api/v1/namespaces/default/events")
