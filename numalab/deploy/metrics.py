"""Stage `metrics` (the registry host, with `numa_metrics`): Debian's prometheus scraping every node's
numa-align /metrics, so its per-cell gauges (`numa_align_node_*`) can be read back through Prometheus' API.

The targets come from numalab.model.metrics (a node Prometheus cannot reach is left out, and said); the
config from templates/k8s/prometheus.yml.j2. Prometheus is restarted only when its config or arguments
changed, and only then waited for on /-/ready, so a second run changes and waits for nothing. Turned off,
a Prometheus numa-lab configured is stopped; one it did not configure is left alone.
"""

from __future__ import annotations

import shlex
from io import StringIO

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.facts.server import Command, Which
from pyinfra.operations import files, server, systemd
from pyinfra.operations.util import any_changed

from numalab.deploy import context
from numalab.deploy.services import running_and_current
from numalab.deploy.waiting import wait_until
from numalab.model import metrics as model
from numalab.model.errors import ValidationError
from numalab.progress import say
from numalab.render import TEMPLATES_DIR, render

SERVICE = "prometheus"  # Debian's unit: /usr/bin/prometheus $ARGS as user prometheus
CONFIG = "/etc/prometheus/prometheus.yml"
RULES = "/etc/prometheus/numa-align-rules.yml"  # alerts on numa-align's cpuset audit: split or drifted containers
RULES_SOURCE = TEMPLATES_DIR / "k8s" / "numa-align-rules.yml"  # Prometheus' own templating inside: not rendered
ARGS_FILE = "/etc/default/prometheus"
MARK = "written by numa-lab"  # in both files: what tells numa-lab's Prometheus from someone else's
READY_TIMEOUT = 120


def scrape_plan() -> model.ScrapePlan:
    """The targets from every node's host data: its numa_align_settings and how numa-align runs there."""
    cluster = context.cluster_of(host)
    settings, daemonset = {}, set()
    for group in ("rke2_servers", "rke2_agents"):
        for other in host.inventory.get_group(group, []):
            name = context.node_name(other)
            if name in cluster.node_names:
                settings[name] = other.data.get("numa_align_settings")
                if context.numa_align_install(other) == "daemonset":
                    daemonset.add(name)
    try:
        return model.scrape_plan(cluster, settings, daemonset)
    except ValidationError as exc:
        raise DeployError(f"inventory: {exc}") from None


def prometheus_config(plan: model.ScrapePlan) -> str:
    return render("k8s/prometheus.yml.j2", interval=model.SCRAPE_INTERVAL, timeout=model.SCRAPE_TIMEOUT,
                  job=model.JOB, node_label=model.NODE_LABEL, targets=plan.targets, rules=RULES)


def prometheus_args() -> str:
    """Debian's /etc/default/prometheus: only a short retention (a lab's series are read minutes later)."""
    return (f"# {ARGS_FILE}, {MARK} (numa_metrics)\n"
            f'ARGS="--storage.tsdb.retention.time={model.RETENTION}"\n')


def _stop_ours() -> None:
    ours = host.get_fact(Command, f"grep -qs {shlex.quote(MARK)} {CONFIG} && echo yes || true")
    if not ours:
        host.noop("numa_metrics is off and numa-lab configured no Prometheus here")
        return
    systemd.service(name="Stop Prometheus (numa_metrics is off)", service=SERVICE, running=False, enabled=False)


@deploy("metrics")
def metrics() -> None:
    """Prometheus' config and arguments, the service enabled and running; waits for /-/ready when (re)started."""
    if not context.runs_metrics(host):
        _stop_ours()
        return
    if not host.get_fact(Which, command="prometheus"):
        raise DeployError(f"{host.name}: numa_metrics is on but Prometheus is not installed (Debian's `prometheus`; "
                          "guests made from a lab image older than numa_metrics lack it: `make lab-destroy`, then "
                          "`make lab`), or set numa_metrics: false")
    plan = scrape_plan()
    for node, why in plan.left_out.items():
        say(f"metrics: Prometheus does not scrape {node}: {why}")
    nodes = ", ".join(target.node for target in plan.targets) or "no node"
    config = files.put(name=f"Prometheus config (numa-align on {nodes}, every {model.SCRAPE_INTERVAL})",
                       src=StringIO(prometheus_config(plan)), dest=CONFIG, mode="644")
    args = files.put(name=f"Prometheus arguments (retention {model.RETENTION})", src=StringIO(prometheus_args()),
                     dest=ARGS_FILE, mode="644")
    rules = files.put(name="numa-align's alerting rules (split or drifted cpusets)", src=str(RULES_SOURCE),
                      dest=RULES, mode="644")
    # Checked before Prometheus is restarted on them: a bad file stops the run here, naming it, while the
    # running Prometheus keeps the rules it loaded.
    server.shell(name=f"promtool check rules {RULES}", commands=[f"promtool check rules {RULES}"],
                 _if=any_changed(rules))
    started = running_and_current(SERVICE, "Prometheus enabled and running",
                                  "Restart Prometheus for its new config, arguments or rules", [config, args, rules])
    wait_until(
        name="Wait for Prometheus /-/ready",
        check=f"curl -sf http://{context.node_address(host)}:{model.PROMETHEUS_PORT}/-/ready >/dev/null",
        timeout=READY_TIMEOUT, unit=SERVICE, node=context.node_name(host), what="Prometheus",
        _if=any_changed(config, args, rules, started),
    )
