#!/usr/bin/env bash
# fabric-ab.sh: metaroce against the RoCEv2 baseline on the netns ECMP
# fabric (scripts/netns-fabric.sh, docs/fabric.md), with ECN CE marking on
# every spine, lossless and lossy: one table of goodput and loss repair,
# the wire's own figures (nftables drops and CE marks) beside the
# transports'. Then, with --runs N, N lossless RoCEv2 runs counted for
# failed work requests.
#
# Usage: fabric-ab.sh [--bin PATH] [--secs S] [--loss "0 1"] [--ce PCT] [--runs N]
#   --bin   the metaroce binary (default bin/metaroce; `make build` makes it)
#   --secs  seconds per perf run (default 4)
#   --loss  loss percentages on every spine (default "0 1")
#   --ce    CE-marking percentage on every spine (default 1)
#   --runs  lossless RoCEv2 runs to count failures over (default 0: none)
# Needs root. The fabric has its own prefix ($MR_FABRIC_PREFIX, default
# mrab-) and is removed on exit.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=bin/metaroce
SECS=4
LOSSES="0 1"
CE=1
RUNS=0
while [ $# -gt 0 ]; do
	[ $# -ge 2 ] || { sed -n '/^# Usage:/,/removed on exit/p' "$0" >&2; exit 2; }
	case $1 in
	--bin) BIN=$2 ;;
	--secs) SECS=$2 ;;
	--loss) LOSSES=$2 ;;
	--ce) CE=$2 ;;
	--runs) RUNS=$2 ;;
	*) sed -n '/^# Usage:/,/removed on exit/p' "$0" >&2; exit 2 ;;
	esac
	shift 2
done
[ -x "$BIN" ] || { echo "fabric-ab: no $BIN (make build)" >&2; exit 1; }
export MR_FABRIC_PREFIX=${MR_FABRIC_PREFIX:-mrab-}
P=$MR_FABRIC_PREFIX
PROFILE=configs/netns-fabric.yaml
TMP=$(mktemp -d)
trap 'scripts/netns-fabric.sh down >/dev/null 2>&1 || true; rm -rf "$TMP"' EXIT

# nft_sum NAME: the packets of the nftables rule NAME ("loss" or "ce"),
# summed over the spines.
nft_sum() {
	local t=0 i n
	for i in 1 2 3 4; do
		n=$(ip netns exec "${P}r$i" nft list table ip mrfabric 2>/dev/null |
			sed -nE "s/.*counter packets ([0-9]+) .*comment \"$1\".*/\1/p")
		t=$((t + ${n:-0}))
	done
	echo "$t"
}

# perf TRANSPORT: one write_bw run, server and client in the hosts
# namespace; prints "rc MB/s sent resent lost failures".
perf() {
	local srv=$TMP/srv cli=$TMP/cli rc=0
	ip netns exec "${P}hosts" "$BIN" perf write_bw --profile "$PROFILE" --transport "$1" \
		--wait 30s --progress never >"$srv" 2>&1 &
	local spid=$!
	sleep 0.3
	timeout $((SECS + 30)) ip netns exec "${P}hosts" "$BIN" perf write_bw --profile "$PROFILE" --transport "$1" \
		10.2.0.2 -D "$SECS" --progress never >"$cli" 2>&1 || rc=$?
	wait "$spid" || [ "$rc" != 0 ] || rc=$?
	awk -v rc="$rc" '
		/^ [0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { bw = $4 }
		/^ data sent/ { sent = $4 }
		/^ resent / { resent = $3 }
		/^ lost / { lost = $3 }
		/^ path failures/ { fail = $4 }
		END { printf "%s %s %s %s %s %s\n", rc, bw ? bw : "-", sent ? sent : 0, resent ? resent : 0, lost ? lost : 0, fail ? fail : 0 }
	' "$cli"
	[ "$rc" = 0 ] || { echo "--- $1 client (rc $rc):" >&2; tail -5 "$cli" >&2; }
}

echo "fabric-ab: $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n) ($(nproc) CPUs), $SECS s write_bw 64 KiB per run, 4 spines, CE ${CE}%"
printf '%-6s %-9s %4s %10s %10s %9s %8s %9s %8s %8s %8s\n' loss% transport rc "MB/s" "data sent" resent "resent%" "SACK/OOS" "fails" "nft drop" "nft CE"
for L in $LOSSES; do
	for T in metaroce rocev2; do
		scripts/netns-fabric.sh up --spines 4 --loss "$L" --ce "$CE" >/dev/null
		read -r rc bw sent resent lost fail < <(perf "$T")
		pct=$(awk -v r="$resent" -v s="$sent" 'BEGIN { printf "%.3f", s ? 100 * r / s : 0 }')
		printf '%-6s %-9s %4s %10s %10s %9s %8s %9s %8s %8s %8s\n' "$L" "$T" "$rc" "$bw" "$sent" "$resent" "$pct" "$lost" "$fail" \
			"$(nft_sum loss)" "$(nft_sum ce)"
	done
done
if [ "$RUNS" -gt 0 ]; then
	scripts/netns-fabric.sh up --spines 4 --ce "$CE" >/dev/null
	failed=0
	resent=0
	for ((i = 1; i <= RUNS; i++)); do
		read -r rc _ _ r _ _ < <(perf rocev2)
		[ "$rc" = 0 ] || failed=$((failed + 1))
		resent=$((resent + r))
	done
	echo "rocev2 lossless (CE ${CE}%): $((RUNS - failed)) of $RUNS runs without a failed work request, $resent packets resent in all"
	[ "$failed" = 0 ]
fi
