#!/usr/bin/env bash
# setup-hugepages.sh: reserve 2 MiB hugepages and mount hugetlbfs for the
# DPDK data path. Idempotent: it only raises the reservation (never lowers
# what others reserved) and mounts only when nothing is mounted yet.
#
# Usage: scripts/setup-hugepages.sh [PAGES]   (default 1024 = 2 GiB, or $HUGEPAGES)
#
# Needs root. Without root, or where the kernel refuses (containers without
# hugetlb), it says so and exits 0 with a notice: everything in metaroce
# also runs with --no-huge (slower, for tests).
set -euo pipefail

pages="${1:-${HUGEPAGES:-1024}}"
sysfs=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
mnt=/dev/hugepages

log() { printf 'setup-hugepages: %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
	log "not root: cannot reserve hugepages; DPDK will need --no-huge"
	exit 0
fi
if [ ! -w "$sysfs" ]; then
	log "$sysfs is not writable here (no hugetlb support?); DPDK will need --no-huge"
	exit 0
fi
have=$(cat "$sysfs")
if [ "$have" -lt "$pages" ]; then
	echo "$pages" >"$sysfs" || true
	got=$(cat "$sysfs")
	if [ "$got" -lt "$pages" ]; then
		log "asked for $pages 2 MiB pages, the kernel gave $got (fragmented memory?)"
	else
		log "reserved $got 2 MiB pages"
	fi
else
	log "$have 2 MiB pages already reserved (>= $pages)"
fi
if ! grep -qs " $mnt hugetlbfs " /proc/mounts; then
	mkdir -p "$mnt"
	mount -t hugetlbfs -o pagesize=2M nodev "$mnt"
	log "mounted hugetlbfs on $mnt"
fi
grep -E '^HugePages_(Total|Free)' /proc/meminfo >&2
