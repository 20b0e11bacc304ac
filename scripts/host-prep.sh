#!/bin/sh
# Prepare this machine to run the numa-lab KVM lab: host packages, libvirt daemons, /dev/kvm access.
# Idempotent: installs only missing packages, starts daemons only when they are not running, and
# changes /dev/kvm's group and mode only when they are not already root:kvm 0660.
set -eu

# chromium: headless, for the screenshot test of the `numalab top --html` page (tests/top/test_browser.py).
PACKAGES="qemu-system-x86 qemu-utils libvirt-daemon-system libvirt-dev pkg-config debootstrap
openssh-client genisoimage xorriso dnsmasq-base iptables nftables iproute2 e2fsprogs gcc python3-dev python3-venv
syslinux syslinux-common mtools dosfstools fdisk openssh-server busybox-static docker-registry chromium"

log() { echo "host-prep: $*"; }

need_root() {
    if [ "$(id -u)" != 0 ]; then
        echo "host-prep: must run as root (apt-get, libvirtd, /dev/kvm); try: sudo $0" >&2
        exit 1
    fi
}

install_packages() {
    missing=""
    for pkg in $PACKAGES; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
            missing="$missing $pkg"
        fi
    done
    if [ -z "$missing" ]; then
        log "packages already installed"
        return
    fi
    log "installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # openssh-server is here only for /usr/sbin/sshd, which the remote-URI lab test runs on 127.0.0.1 with
    # its own config: a fresh install must neither start nor enable a system sshd on every interface.
    new_sshd=""
    case "$missing " in *" openssh-server "*) new_sshd=1 ;; esac
    policy=""
    if [ -n "$new_sshd" ] && [ ! -e /usr/sbin/policy-rc.d ]; then
        policy=/usr/sbin/policy-rc.d
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    # shellcheck disable=SC2086  # word splitting of the package list is intended
    apt-get install -y -qq --no-install-recommends $missing
    if [ -n "$policy" ]; then rm -f "$policy"; trap - EXIT; fi
    if [ -n "$new_sshd" ] && [ -d /run/systemd/system ]; then
        systemctl disable --quiet --now ssh.service ssh.socket 2>/dev/null || true
        log "openssh-server installed for the lab tests' own sshd; the system ssh service is left off"
    fi
}

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start_daemons() {
    if [ -d /run/systemd/system ]; then
        for unit in virtlogd.socket libvirtd.socket libvirtd.service; do
            systemctl is-active --quiet "$unit" || systemctl start "$unit"
        done
        log "libvirtd running (systemd)"
        return
    fi
    if running /run/virtlogd.pid; then log "virtlogd already running"; else virtlogd -d; log "started virtlogd"; fi
    if running /run/libvirtd.pid; then log "libvirtd already running"; else libvirtd -d; log "started libvirtd"; fi
    # libvirtd -d returns before its socket exists; wait for it so the next command can connect.
    i=0
    until [ -S /run/libvirt/libvirt-sock ] || [ "$i" -ge 50 ]; do sleep 0.2; i=$((i + 1)); done
    [ -S /run/libvirt/libvirt-sock ] || { echo "host-prep: libvirtd did not create its socket" >&2; exit 1; }
}

kvm_wanted() {
    case "${NUMALAB_DOMAIN_TYPE:-auto}" in
        qemu) return 1 ;;
        kvm) return 0 ;;
        auto) grep -Eqw 'vmx|svm' /proc/cpuinfo && [ -c /dev/kvm ] ;;
        *) echo "host-prep: NUMALAB_DOMAIN_TYPE must be auto, kvm or qemu, not '${NUMALAB_DOMAIN_TYPE}'" >&2; exit 2 ;;
    esac
}

# /dev/kvm is made usable by libvirt's qemu user wherever it exists, even when guests use software
# emulation: libvirt probes QEMU's capabilities as root (KVM found), then judges /dev/kvm unusable for
# libvirt-qemu and throws its capability cache away on every call, so each domain define takes ~1 min.
prepare_kvm() {
    if kvm_wanted; then
        log "guests use kvm (hardware virtualization)"
        [ -c /dev/kvm ] || { echo "host-prep: kvm requested but /dev/kvm is missing (load kvm_intel/kvm_amd)" >&2; exit 1; }
    else
        log "guests use software emulation (no vmx/svm, or NUMALAB_DOMAIN_TYPE=qemu)"
    fi
    [ -c /dev/kvm ] || return 0
    getent group kvm >/dev/null || groupadd --system kvm
    if [ "$(stat -c %G:%a /dev/kvm)" != "kvm:660" ]; then
        chgrp kvm /dev/kvm
        chmod 660 /dev/kvm
        log "/dev/kvm is now root:kvm 0660"
    fi
    if ! id -nG libvirt-qemu 2>/dev/null | grep -qw kvm; then
        usermod -a -G kvm libvirt-qemu
        log "libvirt-qemu added to group kvm"
    fi
}

# Lab domains under software emulation name scripts/qemu-tcg-single as their emulator (see there). libvirt
# runs it as libvirt-qemu, so it lives outside the clone, where numalab/lab/domains.py looks for it.
TCG_EMULATOR=/usr/local/libexec/numa-lab/qemu-tcg-single
install_tcg_emulator() {
    src="$(dirname "$0")/qemu-tcg-single"
    if cmp -s "$src" "$TCG_EMULATOR"; then
        log "$TCG_EMULATOR already installed"
        return
    fi
    install -D -m 755 "$src" "$TCG_EMULATOR"
    log "installed $TCG_EMULATOR"
}

need_root
install_packages
start_daemons
prepare_kvm
install_tcg_emulator
log "done"
