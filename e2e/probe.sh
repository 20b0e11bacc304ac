#!/bin/sh
# numa-lab placement probe: prints what this process may run on, for numalab.placement.probe.parse_probe_output.
# POSIX sh + grep + cat only, so it runs in a busybox image and in a bare lab guest alike.
# Usage: probe.sh [hold-seconds]   (with hold-seconds, sleep afterwards so the container stays running)
echo "numa-probe begin"
grep -E '^(Cpus|Mems)_allowed_list:' /proc/self/status
if [ -n "${NUMA_NODE+set}" ]; then
    echo "NUMA_NODE=${NUMA_NODE}"
fi
for dir in /sys/devices/system/node/node[0-9]*; do
    [ -r "$dir/cpulist" ] || continue
    echo "${dir##*/} cpulist: $(cat "$dir/cpulist")"
done
echo "numa-probe end"
if [ -n "${1:-}" ]; then
    exec sleep "$1"
fi
