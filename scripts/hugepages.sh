#!/usr/bin/env bash
# hugepages.sh [PAGES]: reserve PAGES 2 MiB hugepages (default 512 = 1 GiB)
# for the DPDK backend, if fewer are reserved. Best effort: where the
# kernel setting cannot be written (not root, a container), it says so and
# exits 0, since the UDP backend needs no hugepages.
set -u
pages="${1:-512}"
f=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
log() { printf 'hugepages: %s\n' "$*" >&2; }
if [ ! -e "$f" ]; then
	log "no 2 MiB hugepage support here ($f missing); the DPDK backend will not run, the UDP backend does not need it"
	exit 0
fi
have="$(cat "$f")"
if [ "$have" -ge "$pages" ]; then
	log "$have x 2 MiB reserved (want $pages)"
	exit 0
fi
if echo "$pages" 2>/dev/null >"$f"; then
	log "reserved $(cat "$f") x 2 MiB (asked for $pages)"
else
	log "could not reserve $pages x 2 MiB ($have now; not root, or a container): only the DPDK backend needs them"
fi
exit 0
