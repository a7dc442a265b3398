#!/usr/bin/env bash
# security-ab.sh: what the sealed modes cost, measured side by side in one
# run. `metaroce perf write_bw` in security.mode none, auth and encrypt
# (docs/security.md), over UDP on loopback (server 127.0.0.1, client
# 127.0.0.2) and over a memif pair (two DPDK processes, --no-huge), runs
# interleaved with the order of the modes rotating, so that the machine's
# swings hit every mode alike; the medians of the runs and their ratios to
# none in one table. Both backends use a 4 KiB MTU, so a 64 KiB WRITE
# travels as 4 KiB payloads (the size issue 15's aims name).
#
# Usage: security-ab.sh [--runs N] [--size BYTES] [--iters N] [--backends "udp memif"]
#                       [--cipher aes-128-gcm|aes-256-gcm] [--bin PATH]
#   --runs      runs per mode and backend (default 5)
#   --size      write_bw -s (default 65536)
#   --iters     write_bw -n (default 20000: 1.3 GB, a second or more per run)
#   --backends  udp, memif or both (default both; memif needs DPDK: make build
#               with libdpdk installed, and root for /run)
# Exit status 0 when every run finished. The aims (auth within 10% of none,
# encrypt within 25%) are reported, not enforced: timing on a shared host
# is no test.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=bin/metaroce
RUNS=5
SIZE=65536
ITERS=20000
BACKENDS="udp memif"
CIPHER=aes-128-gcm
usage() { sed -n '/^# Usage:/,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	[ $# -ge 2 ] || usage
	case $1 in
	--runs) RUNS=$2 ;;
	--size) SIZE=$2 ;;
	--iters) ITERS=$2 ;;
	--backends) BACKENDS=$2 ;;
	--cipher) CIPHER=$2 ;;
	--bin) BIN=$2 ;;
	*) usage ;;
	esac
	shift 2
done
[ -x "$BIN" ] || { echo "security-ab: no $BIN (make build)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT
# One pre-shared key for both ends (docs/security.md: at least 16 bytes).
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TMP/psk"
UDP_PORT=$((20000 + RANDOM % 20000))
TCP_PORT=$((41000 + RANDOM % 10000))
MODES=(none auth encrypt)

# memif profiles: configs/memif-*.yaml with a socket and EAL file prefixes
# of our own and mbufs that hold a 4 KiB MTU's frame.
# memif buffers of 9 KiB: the engine refuses memif buffers smaller than an
# mbuf's data (data_room 4480 here), as DPDK 22.11's memif corrupts frames
# spread over several of them (docs/dpdk.md).
# Each end's lcore on a CPU of its own: floating over both, the two shards
# share one CPU in some runs and halve the rate (docs/dpdk.md).
memif_profile() {
	local role=$1 ip=$2 cpu=$3
	cat >"$TMP/memif-$role.yaml" <<EOF
name: security-ab-memif-$role
backend: dpdk
dpdk:
  eal: ["--lcores", "0@$cpu", "--no-huge", "-m", "512", "--no-pci", "--file-prefix", "mr-secab-$role-$$",
        "--log-level", "lib.eal:error", "--log-level", "pmd.net.memif:error",
        "--vdev", "net_memif0,role=$role,id=0,bsize=9216,socket=$TMP/memif.sock"]
  ports:
    - name: net_memif0
      ip: $ip/24
  pool_size: 8191
  data_room: 4480   # 4 KiB MTU + headers + headroom
metaroce: {paths: 8, mtu: 4096}
EOF
}
memif_profile server 10.99.0.1 0
memif_profile client 10.99.0.2 "$(($(nproc) > 1 ? 1 : 0))"

# run BACKEND MODE: one server/client pair; prints the client's BW average
# (MB/s) or "-" on failure.
run() {
	local be=$1 mode=$2 rc=0 srv=$TMP/srv cli=$TMP/cli sp=() cp=() args
	TCP_PORT=$((TCP_PORT + 1))
	args=(-s "$SIZE" -n "$ITERS" -p "$TCP_PORT" --progress never
		--set "security.mode=$mode" --set "security.cipher=$CIPHER" --set "security.psk_file=$TMP/psk")
	if [ "$be" = memif ]; then
		sp=(--profile "$TMP/memif-server.yaml") cp=(--profile "$TMP/memif-client.yaml")
	else
		args+=(--set metaroce.mtu=4096)
	fi
	env METAROCE_UDP_PORT=$UDP_PORT timeout 120 "$BIN" perf write_bw "${sp[@]}" "${args[@]}" --wait 60s >"$srv" 2>&1 &
	local spid=$!
	sleep 0.5
	env METAROCE_UDP_PORT=$UDP_PORT timeout 120 "$BIN" perf write_bw "${cp[@]}" 127.0.0.1 "${args[@]}" >"$cli" 2>&1 || rc=$?
	wait "$spid" || [ "$rc" != 0 ] || rc=$?
	if [ "$rc" != 0 ]; then
		{ echo "--- $be $mode: rc $rc; client:"; tail -5 "$cli"; echo "server:"; tail -5 "$srv"; } >&2
		echo -
		return
	fi
	awk 'f && NF >= 4 && $1 ~ /^[0-9]+$/ { print $4; exit } /#bytes/ { f = 1 }' "$cli"
}

median() { tr ' ' '\n' | { grep -v '^-\?$' || true; } | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "security-ab: $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname) ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)), $RUNS runs per mode, interleaved; write_bw -s $SIZE -n $ITERS, MTU 4096, $CIPHER"
fails=0
printf '%-8s %-8s %10s %8s %s\n' backend mode "MB/s" "/none" "aim"
for be in $BACKENDS; do
	declare -A got=()
	for ((i = 0; i < RUNS; i++)); do
		for ((k = 0; k < 3; k++)); do
			m=${MODES[$(((i + k) % 3))]}
			x=$(run "$be" "$m")
			[ "$x" != - ] || fails=$((fails + 1))
			got[$m]="${got[$m]:-} $x"
		done
	done
	base=$(echo "${got[none]}" | median)
	for m in "${MODES[@]}"; do
		echo "  $be $m:${got[$m]}" >&2
		med=$(echo "${got[$m]}" | median)
		awk -v be="$be" -v m="$m" -v x="$med" -v b="$base" 'BEGIN {
			aim = m == "auth" ? 0.90 : m == "encrypt" ? 0.75 : 1
			if (x == "-" || b == "-" || b == 0) { printf "%-8s %-8s %10s %8s -\n", be, m, x, "-"; exit }
			r = x / b
			printf "%-8s %-8s %10s %8.3f %s\n", be, m, x, r, m == "none" ? "" : (r >= aim ? "met" : "missed") sprintf(" (>= %.2f)", aim)
		}'
	done
	unset got
done
[ "$fails" = 0 ] || { echo "security-ab: $fails runs failed" >&2; exit 1; }
