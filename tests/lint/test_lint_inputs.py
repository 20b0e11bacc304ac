"""Which objects lint reads, how it prints findings, and exit 2 for input it cannot read."""

from __future__ import annotations

import io
import json

import pytest
import yaml

from numalab.cli import main
from numalab.lint.workloads import line_of

TEMPLATE = """\
      containers:
      - name: app
        image: probe
        resources:
          limits: {cpu: 500m, memory: 64Mi, numa-align/numa-0: 1}
"""


def wrapped(kind: str) -> str:
    if kind == "CronJob":
        head = "spec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n"
        return f"kind: CronJob\nmetadata: {{name: c}}\n{head}" + _indent(TEMPLATE, 4)
    head = "spec:\n  template:\n    spec:\n"
    return f"kind: {kind}\nmetadata: {{name: w}}\n{head}" + TEMPLATE


def _indent(text: str, spaces: int) -> str:
    return "".join(" " * spaces + line if line.strip() else line for line in text.splitlines(keepends=True))


def run(tmp_path, capsys, *docs, fmt="text", name="m.yaml"):
    path = tmp_path / name
    path.write_text("\n---\n".join(docs))
    code = main(["lint", str(path), "--format", fmt])
    out, err = capsys.readouterr()
    return code, out, err, path


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"])
def test_every_workload_kind_has_its_pod_spec_read(tmp_path, capsys, kind):
    code, out, _, _ = run(tmp_path, capsys, wrapped(kind), fmt="json")
    assert code == 1
    fields = {f["field"] for f in json.loads(out)}
    prefix = "spec.jobTemplate.spec.template.spec" if kind == "CronJob" else "spec.template.spec"
    assert f"{prefix}.containers[0].resources.limits.cpu" in fields


def test_text_output_is_one_line_per_finding(tmp_path, capsys):
    service = "kind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80}]}\n"
    code, out, err, path = run(tmp_path, capsys, service, wrapped("Deployment"))
    assert code == 1 and err == ""
    lines = out.splitlines()
    assert lines == [
        f"{path}:15: Deployment/w container app: spec.template.spec.containers[0].resources.limits.cpu: "
        "cpu 500m is not a whole number of cores: the container runs in the shared pool [fractional-cpu]",
    ]


def test_kubectl_list_items_are_read(tmp_path, capsys):
    pod = "{kind: Pod, metadata: {name: p}, spec: {containers: [{name: a, resources: {limits: " \
          "{cpu: '1', memory: 1Gi, numa-align/numa-0: 1}, requests: {numa-align/numa-0: 2}}}]}}"
    code, out, _, _ = run(tmp_path, capsys, f"kind: List\nitems:\n- {pod}\n", fmt="json")
    assert code == 1
    assert [f["rule"] for f in json.loads(out)] == ["numa-align-limits"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Pod\nspec: [unclosed\n", "not YAML"),
        ("- just\n- a list\n", "document 1: expected a Kubernetes object"),
        ("kind: Deployment\nmetadata: {name: d}\nspec: {}\n", "Deployment/d: spec.template: missing"),
        ("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, resources: {limits: "
         "{cpu: lots, numa-align/numa-0: 1}}}]}\n", "spec.containers[0].resources.limits.cpu"),
    ],
)
def test_unreadable_input_exits_2_with_one_line(tmp_path, capsys, text, message):
    code, out, err, _ = run(tmp_path, capsys, text)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and message in err and err.startswith("numalab lint: ")


def test_missing_file_exits_2(tmp_path, capsys):
    assert main(["lint", str(tmp_path / "absent.yaml")]) == 2
    assert "absent.yaml: cannot read: No such file or directory" in capsys.readouterr().err


def test_bad_topology_file_exits_2_naming_the_field(tmp_path, capsys):
    manifest = tmp_path / "m.yaml"
    manifest.write_text(wrapped("Job"))
    topology = tmp_path / "t.yaml"
    topology.write_text("worker-a:\n  cells:\n  - {id: 0, cpus: 'x', memory: 1Gi}\n")
    assert main(["lint", str(manifest), "--topology", str(topology)]) == 2
    err = capsys.readouterr().err
    assert "worker-a.cells[0].cpus" in err and err.count("\n") == 1


def test_findings_give_the_line_of_the_field_and_the_document(tmp_path, capsys):
    """The line is the field's own (the cpu key on line 15 of the second document), so an editor jumps
    to it; JSON keeps the document number too."""
    service = "kind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80}]}\n"
    code, out, _, _ = run(tmp_path, capsys, service, wrapped("Deployment"), fmt="json")
    [finding] = json.loads(out)
    assert (code, finding["document"], finding["line"]) == (1, 2, 15)
    assert (tmp_path / "m.yaml").read_text().splitlines()[14].strip().startswith("limits: {cpu: 500m")


def test_a_missing_field_points_at_the_deepest_part_that_exists():
    text = "spec:\n  containers:\n  - name: a\n    resources:\n      limits:\n        example.com/gpu: 1\n"
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    assert line_of(node, "spec.containers[0].resources.limits.example.com/gpu") == 6  # a key with dots
    assert line_of(node, "spec.containers[0].resources.requests.memory") == 4  # no requests: resources
    assert line_of(node, "spec.containers[3].resources") == 2  # no such container: the list


def test_dash_reads_the_manifest_from_stdin(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(wrapped("Job")))
    assert main(["lint", "-"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("<stdin>:10: Job/w container app: spec.template.spec.containers[0].resources.limits.cpu")


def test_dash_twice_is_refused(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(wrapped("Job")))
    assert main(["lint", "-", "-"]) == 2
    assert "- (standard input) can be given once" in capsys.readouterr().err


def test_not_yaml_on_stdin_names_stdin_and_the_line(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("kind: Pod\nspec: [unclosed\n"))
    assert main(["lint", "-"]) == 2
    assert "<stdin>:3: not YAML" in capsys.readouterr().err
