# numa-lab: `make lab` brings the KVM lab up, `make test` runs every test (CI runs it through .ci/run).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: help host venv lint test test-fast lab lab-status lab-destroy e2e bench scale protos clean

help:
	@echo "make lab          install host packages, build the image, bring the lab up (pyinfra)"
	@echo "make test         install what the tests need, run ruff and every test (lab tests boot VMs)"
	@echo "make test-fast    the tests that boot no VM"
	@echo "make e2e          the e2e suite against \$$KUBECONFIG (default: the lab's kubeconfig)"
	@echo "make bench        benchmarks (print ratios)"
	@echo "make scale        fleet scale: 100, 1,000 and 5,000 simulated nodes, each scheduler side by side (plots)"
	@echo "make protos       regenerate the kubelet API gRPC code in plugin/numa_align/api"

# Host packages and the libvirt daemons (root; idempotent).
host:
	sh scripts/host-prep.sh

$(BIN)/.installed: pyproject.toml plugin/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e plugin/
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

venv: $(BIN)/.installed

lint: venv
	$(BIN)/ruff check .

# The cluster test and the other tests run side by side (scripts/test-side-by-side says why); both get
# PYTEST_ARGS (but not -m: each run has its own). pytest exits 5 when it collected nothing: that is a
# failure here when neither run collected a test. The fleet binaries are built beside the first deploy
# (NUMALAB_PREBUILD: scripts/test-side-by-side says why).
test: host venv lint
	NUMALAB_PREBUILD="nice -n 10 $(BIN)/python -m numalab.fleet.build" \
	  scripts/test-side-by-side $(BIN)/pytest --durations=15 $(PYTEST_ARGS)

test-fast: venv
	$(BIN)/pytest tests -m 'not lab and not fleet' $(PYTEST_ARGS)

lab: host venv
	$(BIN)/pyinfra -y inventories/kvm.py deploys/cluster.py

lab-status: venv
	$(BIN)/numalab lab status

lab-destroy: venv
	$(BIN)/numalab lab destroy

# The e2e suite talks to a live cluster: by default the lab's fetched kubeconfig and SSH config.
LAB_STATE ?= $(HOME)/.local/share/numa-lab/$(or $(NUMALAB_NAME),numa-lab)
E2E_KUBECONFIG ?= $(or $(KUBECONFIG),$(LAB_STATE)/kubeconfig)
E2E_SSH_CONFIG ?= $(or $(NUMALAB_SSH_CONFIG),$(LAB_STATE)/ssh_config)
# The lab's Prometheus (the metrics stage, on the registry host): its address from the lab's ssh_config.
E2E_PROMETHEUS_URL ?= $(or $(NUMALAB_PROMETHEUS_URL),$(shell awk '$$1 == "Host" {h = $$2} h == "registry" && $$1 == "HostName" {print "http://" $$2 ":9090"; exit}' $(E2E_SSH_CONFIG) 2>/dev/null))
e2e: venv
	KUBECONFIG=$(E2E_KUBECONFIG) NUMALAB_SSH_CONFIG=$(E2E_SSH_CONFIG) NUMALAB_PROMETHEUS_URL=$(E2E_PROMETHEUS_URL) \
	  $(BIN)/pytest e2e $(PYTEST_ARGS)

bench: venv
	@for b in bench/*_bench.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# The fleet-scale bench (issue 28, bench/fleet_scale.py): a native control plane on loopback with kwok
# nodes for each side: the default scheduler, then each numa-scheduler strategy (about an hour at 1,000 nodes). Builds
# (or finds cached) etcd, kwok and the Kubernetes binaries first. SCALE_ARGS adds options (--out DIR, --resume, ...).
SCALE_SIZES ?= 100,1000,5000
SCALE_ARGS ?=
scale: venv
	$(BIN)/python -m numalab.fleet.build
	$(BIN)/python bench/fleet_scale.py --sizes $(SCALE_SIZES) $(SCALE_ARGS)

protos: venv
	sh plugin/gen_protos.sh $(abspath $(BIN))/python

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
