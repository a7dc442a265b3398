#!/usr/bin/env bash
# netns-fabric.sh: a real two-tier ECMP fabric out of network namespaces,
# for running metaroce (configs/netns-fabric.yaml) over Linux forwarding.
#
#   hosts(hA0 10.1.0.2) - leafA - r1..rN - leafB - (hB0 10.2.0.2)hosts
#
# The layout and addresses are test/kernelfabric's (docs/fabric.md):
#   - PREFIX.hosts holds both endpoints: hA0 10.1.0.2/24 (gateway leafA
#     10.1.0.1) and hB0 10.2.0.2/24 (gateway leafB 10.2.0.1). Policy
#     routing sends what host A sends to host B out of hA0 (and the reverse
#     out of hB0) instead of delivering it locally, so one process (metaroce
#     bench) can use both ends and every packet still crosses the fabric.
#   - leafA and leafB route to the other host's /24 over N nexthops, one per
#     spine, with L4 hashing (net.ipv4.fib_multipath_hash_policy=1): each
#     UDP source port is its own flow and is pinned to one spine.
#   - spine ri: leafA-side ra0 10.11.i.2/24 (leafA u<i> 10.11.i.1), leafB-side
#     rb0 10.12.i.1/24 (leafB v<i> 10.12.i.2).
#   - impairments on the chosen spines (--impair, default all): nftables
#     table "ip mrfabric" in the spine's forward hook, ECN CE marking of
#     ECN-capable packets (--ce PCT) and random drop (--loss PCT), both
#     directions, with counters; tbf (--rate) on spine --rate-spine's rb0
#     (the A-to-B direction).
#
# Usage: netns-fabric.sh up|down|status [--spines N] [--loss PCT] [--ce PCT]
#        [--impair LIST] [--rate RATE] [--rate-spine I]
#   up      builds what is missing and (re)applies the impairments: run it
#           again to change loss, CE or rate. Changing --spines rebuilds the
#           spine set.
#   down    removes every namespace named PREFIX* (with its veths).
#   status  namespaces, ECMP routes, nftables counters, tbf statistics.
# PREFIX is $MR_FABRIC_PREFIX (ending in "-"), default "mrfab-". Nothing outside the
# namespaces named PREFIX* is touched, and traffic only flows between them.
set -euo pipefail

PREFIX=${MR_FABRIC_PREFIX:-mrfab-}
SPINES=4
LOSS=0
CE=0
IMPAIR=all
RATE=
RATE_SPINE=1

usage() {
	sed -n '/^# Usage:/,/traffic only flows/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

die() {
	echo "netns-fabric: $*" >&2
	exit 1
}

[ $# -ge 1 ] || usage
CMD=$1
shift
while [ $# -gt 0 ]; do
	[ $# -ge 2 ] || usage
	case $1 in
	--spines) SPINES=$2 ;;
	--loss) LOSS=$2 ;;
	--ce) CE=$2 ;;
	--impair) IMPAIR=$2 ;;
	--rate) RATE=$2 ;;
	--rate-spine) RATE_SPINE=$2 ;;
	*) usage ;;
	esac
	shift 2
done

# The trailing "-" keeps one prefix from matching another's namespaces
# (mrfs12- never matches mrfs123-hosts).
case $PREFIX in
*[!A-Za-z0-9_.-]* | *[!-] | -*) die "MR_FABRIC_PREFIX=$PREFIX: want letters, digits, _ . - ending in -" ;;
esac
[[ $SPINES =~ ^[0-9]+$ ]] && [ "$SPINES" -ge 1 ] && [ "$SPINES" -le 64 ] || die "--spines $SPINES: want 1..64"
[[ $RATE_SPINE =~ ^[0-9]+$ ]] && [ "$RATE_SPINE" -ge 1 ] && [ "$RATE_SPINE" -le "$SPINES" ] ||
	die "--rate-spine $RATE_SPINE: want 1..$SPINES"

# basis points (1/100 of a percent) of a percentage such as 1 or 0.5.
bp() {
	[[ $1 =~ ^[0-9]+(\.[0-9]{1,2})?$ ]] || die "percentage $1: want a number 0..100, at most 2 decimals"
	local v
	v=$(awk -v p="$1" 'BEGIN { printf "%d", p * 100 + 0.5 }')
	[ "$v" -le 10000 ] || die "percentage $1: want 0..100"
	echo "$v"
}

ns() { echo "${PREFIX}$1"; }
nsx() {
	local n=$1
	shift
	ip netns exec "$(ns "$n")" "$@"
}
have_ns() { [ -e "/run/netns/$(ns "$1")" ]; }
have_link() { ip -n "$(ns "$1")" link show dev "$2" >/dev/null 2>&1; }

mk_ns() {
	have_ns "$1" || ip netns add "$(ns "$1")"
	ip -n "$(ns "$1")" link set lo up
}

# veth NS_A IF_A NS_B IF_B: a veth pair, unless the A end exists already
# (a half-made pair cannot exist: both ends come and go together).
veth() {
	have_link "$1" "$2" || ip link add "$2" netns "$(ns "$1")" type veth peer name "$4" netns "$(ns "$3")"
}

addr() {
	ip -n "$(ns "$1")" addr replace "$3" dev "$2"
	ip -n "$(ns "$1")" link set "$2" up
}

sysctls() {
	local n=$1
	shift
	local kv
	for kv in "$@"; do
		nsx "$n" sysctl -qw "$kv" >/dev/null
	done
}

# spines_present: the indexes of the spine namespaces that exist.
spines_present() {
	local f
	for f in /run/netns/"${PREFIX}"r*; do
		[ -e "$f" ] || continue
		f=${f##*/"${PREFIX}"r}
		[[ $f =~ ^[0-9]+$ ]] && echo "$f"
	done | sort -n
}

impaired() {
	[ "$IMPAIR" = all ] && return 0
	local s
	for s in ${IMPAIR//,/ }; do
		[ "$s" = "$1" ] && return 0
	done
	return 1
}

up() {
	local loss_bp ce_bp i r
	loss_bp=$(bp "$LOSS")
	ce_bp=$(bp "$CE")
	if [ "$IMPAIR" != all ]; then
		for i in ${IMPAIR//,/ }; do
			[[ $i =~ ^[0-9]+$ ]] && [ "$i" -ge 1 ] && [ "$i" -le "$SPINES" ] || die "--impair $IMPAIR: want all or spines 1..$SPINES"
		done
	fi
	for n in hosts leafA leafB; do mk_ns "$n"; done
	# Spines beyond N from an earlier, larger fabric go first.
	for i in $(spines_present); do
		[ "$i" -le "$SPINES" ] || ip netns del "$(ns "r$i")"
	done

	# hosts: both endpoints. Locally generated A->B (and B->A) traffic is
	# routed out of the host's own interface by rules ahead of the local
	# table; what arrives from the fabric (iif hA0/hB0) is delivered
	# locally as usual. accept_local admits packets whose source is one of
	# our own addresses (the other host's).
	veth hosts hA0 leafA a0
	veth hosts hB0 leafB b0
	sysctls hosts net.ipv4.ip_forward=0 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
		net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
	addr hosts hA0 10.1.0.2/24
	addr hosts hB0 10.2.0.2/24
	sysctls hosts net.ipv4.conf.hA0.accept_local=1 net.ipv4.conf.hB0.accept_local=1 \
		net.ipv4.conf.hA0.rp_filter=0 net.ipv4.conf.hB0.rp_filter=0
	ip -n "$(ns hosts)" route replace default via 10.1.0.1 dev hA0 table 101
	ip -n "$(ns hosts)" route replace default via 10.2.0.1 dev hB0 table 102
	if ! ip -n "$(ns hosts)" rule show pref 10 | grep -q .; then
		ip -n "$(ns hosts)" rule add pref 10 iif lo from 10.1.0.2 to 10.2.0.0/24 lookup 101
	fi
	if ! ip -n "$(ns hosts)" rule show pref 11 | grep -q .; then
		ip -n "$(ns hosts)" rule add pref 11 iif lo from 10.2.0.2 to 10.1.0.0/24 lookup 102
	fi
	if ip -n "$(ns hosts)" rule show pref 0 | grep -q 'lookup local'; then
		ip -n "$(ns hosts)" rule add pref 100 lookup local
		ip -n "$(ns hosts)" rule del pref 0
	fi

	addr leafA a0 10.1.0.1/24
	addr leafB b0 10.2.0.1/24
	for n in leafA leafB; do
		sysctls "$n" net.ipv4.ip_forward=1 net.ipv4.fib_multipath_hash_policy=1 \
			net.ipv4.conf.all.ignore_routes_with_linkdown=1 net.ipv4.conf.default.ignore_routes_with_linkdown=1 \
			net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
			net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
	done
	local -a hopsA=() hopsB=()
	for ((i = 1; i <= SPINES; i++)); do
		r=r$i
		mk_ns "$r"
		sysctls "$r" net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
			net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
		veth leafA "u$i" "$r" ra0
		veth leafB "v$i" "$r" rb0
		addr leafA "u$i" "10.11.$i.1/24"
		addr "$r" ra0 "10.11.$i.2/24"
		addr "$r" rb0 "10.12.$i.1/24"
		addr leafB "v$i" "10.12.$i.2/24"
		ip -n "$(ns "$r")" route replace 10.1.0.0/24 via "10.11.$i.1" dev ra0
		ip -n "$(ns "$r")" route replace 10.2.0.0/24 via "10.12.$i.2" dev rb0
		hopsA+=(nexthop via "10.11.$i.2" dev "u$i")
		hopsB+=(nexthop via "10.12.$i.1" dev "v$i")

		# Impairments: replaced as a whole on every up.
		nsx "$r" nft delete table ip mrfabric 2>/dev/null || true
		if impaired "$i" && { [ "$loss_bp" -gt 0 ] || [ "$ce_bp" -gt 0 ]; }; then
			nsx "$r" nft -f - <<EOF
table ip mrfabric {
	chain forward {
		type filter hook forward priority 0; policy accept;
		ip ecn != not-ect numgen random mod 10000 < $ce_bp counter ip ecn set ce comment "ce"
		numgen random mod 10000 < $loss_bp counter drop comment "loss"
	}
}
EOF
		fi
		tc -n "$(ns "$r")" qdisc del dev rb0 root 2>/dev/null || true
		if [ -n "$RATE" ] && [ "$i" = "$RATE_SPINE" ]; then
			tc -n "$(ns "$r")" qdisc add dev rb0 root tbf rate "$RATE" burst 64kb latency 50ms
		fi
	done
	ip -n "$(ns leafA)" route replace 10.2.0.0/24 "${hopsA[@]}"
	ip -n "$(ns leafB)" route replace 10.1.0.0/24 "${hopsB[@]}"
	echo "netns-fabric: up: ${PREFIX}hosts, leafA, leafB, r1..r$SPINES; loss ${LOSS}% CE ${CE}% on spines $IMPAIR; tbf ${RATE:-off}${RATE:+ on r$RATE_SPINE}"
}

down() {
	local f n
	for f in /run/netns/"${PREFIX}"*; do
		[ -e "$f" ] || continue
		n=${f##*/}
		ip netns del "$n"
	done
	echo "netns-fabric: down: no ${PREFIX}* namespace left"
}

status() {
	local i
	have_ns hosts || die "no fabric (${PREFIX}hosts missing): run up"
	echo "namespaces:"
	ip netns list | awk -v p="$PREFIX" 'index($1, p) == 1 { print "  " $1 }'
	echo "leafA -> 10.2.0.0/24:"
	ip -n "$(ns leafA)" route show 10.2.0.0/24 | sed 's/^/  /'
	echo "leafB -> 10.1.0.0/24:"
	ip -n "$(ns leafB)" route show 10.1.0.0/24 | sed 's/^/  /'
	for i in $(spines_present); do
		echo "r$i: rx from leafA $(nsx "r$i" cat /sys/class/net/ra0/statistics/rx_packets), from leafB $(nsx "r$i" cat /sys/class/net/rb0/statistics/rx_packets)"
		nsx "r$i" nft list table ip mrfabric 2>/dev/null | grep counter | sed 's/^[[:space:]]*/  nft: /' || true
		tc -n "$(ns "r$i")" -s qdisc show dev rb0 | grep -A2 tbf | sed 's/^/  /' || true
	done
}

[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
case $CMD in
up) up ;;
down) down ;;
status) status ;;
*) usage ;;
esac
