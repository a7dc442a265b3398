#!/usr/bin/env bash
# verbs-ab.sh: the verbs library against the native Go path, side by side
# in one run. Debian's unmodified perftest binaries through
# build/verbs/libibverbs.so.1 (A) and `metaroce perf` (B), the same test,
# message size, outstanding depth and iteration count, the same profile and
# backend (UDP on loopback: server 127.0.0.1, client 127.0.0.2), runs
# interleaved A B B A A B ... so that the machine's swings hit both sides
# alike; the medians of the runs and their ratios in one table.
#
#   ib_write_bw -s S -t T -n N   against   metaroce perf write_bw -s S -t T -n N
#   ib_send_lat -s S -n N        against   metaroce perf send_lat -s S -n N
#
# bw is perftest's "BW average" (MB/s, 2^20 bytes), lat its t_typical (the
# median half round trip, us); both tools print the same table.
#
# Usage: verbs-ab.sh [--runs N] [--bw-sizes "65536 4096"] [--lat-sizes "64 4096"]
#                    [--bw-iters N] [--lat-iters N] [--depth T] [--profile FILE]
#                    [--taskset "CPUS_SERVER CPUS_CLIENT"] [--bin PATH] [--lib DIR]
#   --runs      runs per side and point (default 5)
#   --bw-iters  write_bw -n (default 5000 at 64 KiB, scaled to the same bytes
#               for smaller sizes, at most 50000)
#   --lat-iters send_lat -n (default 5000)
#   --depth     write_bw -t, outstanding WRs per QP (default 128, perftest's)
#   --profile   METAROCE_PROFILE for both sides (default: the embedded
#               loopback-udp profile)
#   --taskset   pin the server and the client to these CPU lists (taskset -c)
#   --bin/--lib the metaroce binary (make build) and the library (make verbs)
# Exit status 0 when every run of both sides finished; the targets
# (library >= 90% of native bandwidth, <= 120% of its median latency) are
# reported in the table, not enforced: timing on a shared host is no test.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=bin/metaroce
LIB=build/verbs
RUNS=5
BW_SIZES="65536 4096"
LAT_SIZES="64 4096"
BW_ITERS=
LAT_ITERS=5000
DEPTH=128
PROFILE=${METAROCE_PROFILE:-}
PIN=
usage() { sed -n '/^# Usage:/,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	[ $# -ge 2 ] || usage
	case $1 in
	--runs) RUNS=$2 ;;
	--bw-sizes) BW_SIZES=$2 ;;
	--lat-sizes) LAT_SIZES=$2 ;;
	--bw-iters) BW_ITERS=$2 ;;
	--lat-iters) LAT_ITERS=$2 ;;
	--depth) DEPTH=$2 ;;
	--profile) PROFILE=$2 ;;
	--taskset) PIN=$2 ;;
	--bin) BIN=$2 ;;
	--lib) LIB=$2 ;;
	*) usage ;;
	esac
	shift 2
done
[ -x "$BIN" ] || { echo "verbs-ab: no $BIN (make build)" >&2; exit 1; }
[ -f "$LIB/libibverbs.so.1" ] && [ -f "$LIB/libmetaroce-verbs.so" ] || { echo "verbs-ab: no $LIB/libibverbs.so.1 (make verbs)" >&2; exit 1; }
for p in ib_write_bw ib_send_lat; do
	command -v "$p" >/dev/null || { echo "verbs-ab: no $p (scripts/install-deps.sh installs perftest)" >&2; exit 1; }
done
LIB=$(cd "$LIB" && pwd)
SRV_IP=127.0.0.1
CLI_IP=127.0.0.2
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT
export METAROCE_PROFILE=$PROFILE
# A UDP port and TCP setup ports of our own: other programs on this host
# (tests, other runs) may use the defaults.
UDP_PORT=$((20000 + RANDOM % 20000))
TCP_PORT=$((41000 + RANDOM % 10000))
PIN_S=() PIN_C=()
if [ -n "$PIN" ]; then
	read -r a b <<<"$PIN"
	PIN_S=(taskset -c "$a") PIN_C=(taskset -c "${b:-$a}")
fi

# run SIDE TEST SIZE ITERS: one server/client pair; prints the client's
# figure (bw: BW average MB/s; lat: t_typical us) or "-" on failure.
run() {
	local side=$1 test=$2 size=$3 iters=$4 rc=0 args srv cli
	TCP_PORT=$((TCP_PORT + 1))
	args=(-s "$size" -n "$iters" -p "$TCP_PORT")
	[ "$test" = write_bw ] && args+=(-t "$DEPTH")
	srv=$TMP/srv cli=$TMP/cli
	if [ "$side" = lib ]; then
		env LD_LIBRARY_PATH="$LIB" METAROCE_VERBS_IP=$SRV_IP \
			"${PIN_S[@]}" timeout 120 "ib_$test" -F "${args[@]}" >"$srv" 2>&1 &
		local spid=$!
		sleep 0.3
		env LD_LIBRARY_PATH="$LIB" METAROCE_VERBS_IP=$CLI_IP \
			"${PIN_C[@]}" timeout 120 "ib_$test" -F "${args[@]}" "$SRV_IP" >"$cli" 2>&1 || rc=$?
	else
		env METAROCE_UDP_PORT=$UDP_PORT "${PIN_S[@]}" timeout 120 "$BIN" perf "$test" "${args[@]}" \
			--progress never --wait 60s >"$srv" 2>&1 &
		local spid=$!
		sleep 0.3
		env METAROCE_UDP_PORT=$UDP_PORT "${PIN_C[@]}" timeout 120 "$BIN" perf "$test" "$SRV_IP" "${args[@]}" \
			--progress never >"$cli" 2>&1 || rc=$?
	fi
	wait "$spid" || [ "$rc" != 0 ] || rc=$?
	if [ "$rc" != 0 ]; then
		{ echo "--- $side $test -s $size: rc $rc; client:"; tail -5 "$cli"; echo "server:"; tail -5 "$srv"; } >&2
		echo -
		return
	fi
	# The result row follows the "#bytes" header: bw's 4th column is the
	# average, lat's 5th t_typical.
	awk -v col="$([ "$test" = write_bw ] && echo 4 || echo 5)" \
		'f && NF >= col && $1 ~ /^[0-9]+$/ { print $col; exit } /#bytes/ { f = 1 }' "$cli"
}

median() { tr ' ' '\n' | { grep -v '^-\?$' || true; } | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

fails=0
rows=()
point() {
	local test=$1 size=$2 iters=$3 a=() b=() i x y
	for ((i = 1; i <= RUNS; i++)); do
		# A B, then B A: neither side always runs first.
		if ((i % 2)); then
			x=$(run lib "$test" "$size" "$iters"); y=$(run native "$test" "$size" "$iters")
		else
			y=$(run native "$test" "$size" "$iters"); x=$(run lib "$test" "$size" "$iters")
		fi
		[ "$x" != - ] && [ "$y" != - ] || fails=$((fails + 1))
		a+=("$x") b+=("$y")
	done
	local ma mb
	ma=$(echo "${a[*]}" | median) mb=$(echo "${b[*]}" | median)
	echo "  $test -s $size -n $iters: library ${a[*]} | native ${b[*]}" >&2
	rows+=("$(awk -v t="$test" -v s="$size" -v n="$iters" -v a="$ma" -v b="$mb" 'BEGIN {
		unit = t == "write_bw" ? "MB/s" : "us p50"
		if (a == "-" || b == "-" || b == 0) { printf "%-9s %8s %6s %-7s %10s %10s %7s %s", t, s, n, unit, a, b, "-", "-"; exit }
		r = a / b
		ok = t == "write_bw" ? (r >= 0.90 ? "yes" : "no") : (r <= 1.20 ? "yes" : "no")
		goal = t == "write_bw" ? ">= 0.90" : "<= 1.20"
		printf "%-9s %8s %6s %-7s %10.2f %10.2f %7.3f %s (%s)", t, s, n, unit, a, b, r, ok, goal }')")
}

echo "verbs-ab: $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n) ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)), $RUNS runs per side, interleaved; profile ${PROFILE:-loopback-udp (embedded)}${PIN:+, taskset $PIN}" >&2
for s in $BW_SIZES; do
	n=${BW_ITERS:-$((5000 * 65536 / s))}
	[ -n "$BW_ITERS" ] || [ "$n" -le 50000 ] || n=50000
	point write_bw "$s" "$n"
done
for s in $LAT_SIZES; do
	point send_lat "$s" "$LAT_ITERS"
done
printf '%-9s %8s %6s %-7s %10s %10s %7s %s\n' test size iters unit library native lib/nat "within target"
for r in "${rows[@]}"; do echo "$r"; done
[ "$fails" = 0 ] || { echo "verbs-ab: $fails runs failed (above)" >&2; exit 1; }
