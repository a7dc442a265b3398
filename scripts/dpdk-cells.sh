#!/usr/bin/env bash
# dpdk-cells.sh: the four cells of issue 16 over the DPDK backend, for
# metaroce, the RoCEv2 baseline and (optionally) any other transport, on a
# memif pair and on af_packet over a veth pair; 3 runs per cell, medians,
# printed as one Markdown table (make bench-cells). Around every run it
# measures the two cores' cache-line latency (metaroce corelat), which a
# shared VM moves by 4 to 5 times within seconds; when some runs' cores did
# not share a cache, the table follows again with the runs whose cores did.
#
#   64 B ping-pong        round trips/s, RTT p50 and p99.9   (send_lat -s 64)
#   64 B, 32 outstanding  messages/s                         (send_bw -s 64 -t 32)
#   32 KiB, 8 outstanding Gb/s of goodput                    (write_bw -s 32768 -t 8)
#   1 MiB, 2 outstanding  Gb/s of goodput                    (write_bw -s 1048576 -t 2)
#
# Each run is two processes, a server and a client, each pinned to one core
# with taskset (and its EAL lcore on that same core), started fresh, bounded
# by a timeout. memif: a socket in the harness's temporary directory.
# af_packet: a network namespace the harness creates with a veth pair inside
# (one end per process, no kernel addresses on them); the setup exchange runs
# over that namespace's loopback. The namespace, the EAL runtime directories
# and every process group the harness started are removed on exit, failure
# and interrupt included.
#
# Usage: scripts/dpdk-cells.sh [options]
#   --bin PATH            metaroce binary built with -tags dpdk (default bin/metaroce)
#   --runs N              runs per cell (default 3); the table shows medians
#   --duration S          seconds each run measures, integer (default 2)
#   --backends LIST       memif,af_packet (default both)
#   --transports LIST     metaroce,rocev2 (default both; may be empty with --other)
#   --cells LIST          pp,rate,g32k,g1m (default all four)
#   --other CMD           another transport, run beside (contract below)
#   --other-name NAME     its column's name (default other)
#   --cores A,B           server core, client core (default 0,1)
#   --mtu N               payload bytes per data packet of the built-in columns,
#                         256..9000 (default 1024). metaroce uses N; the RoCEv2
#                         baseline the largest IB MTU (256..4096) not above N.
#                         Frames over 2 KiB get memif buffers (bsize), af_packet
#                         frames (framesz) and mbufs (data_room) that hold a
#                         whole frame, and the veth pair an MTU to match
#   --kernel-rx on|off    af_packet: whether the kernel's own stack also
#                         receives the frames on the veth pair (default off).
#                         off: an nftables netdev ingress chain drops them
#                         after af_packet's taps have copied them, so the
#                         kernel neither routes nor answers them; the table
#                         says how many it dropped. on: every frame also
#                         goes through ip_rcv and a route lookup, on the
#                         sending process's core (docs/dpdk.md)
#   --huge auto|on|off    2 MiB hugepages (--in-memory) or --no-huge; auto: on
#                         when at least 300 pages are free (default auto)
#   --set KEY=VALUE       a profile key for both perf ends of the built-in
#                         columns (perf --set), e.g. rocev2.ack_timeout_code=14;
#                         repeatable (default: none, the profile's defaults)
#   --tiny                one run of 1 s, memif only (what the test runs)
#   --keep DIR            keep every run's output under DIR
#
# The --other contract. CMD is run through bash once per role and run, after
# these placeholders are replaced:
#   {role}         server or client (the harness starts the server first)
#   {size}         message size in bytes (64, 32768, 1048576)
#   {outstanding}  messages in flight (1: ping-pong, one at a time)
#   {duration}     seconds the client measures
#   {backend}      memif or af_packet
#   {core}         the CPU this process is pinned to (taskset already applied)
#   {sock}         memif: the socket path ({role} server listens on it)
#   {iface}        af_packet: this role's veth (both in the harness's namespace,
#                  where CMD runs; no kernel addresses on them)
#   {ip} {peer_ip} IPv4 addresses for this end and the other
#   {port}         a TCP port for a setup exchange; the server is at 127.0.0.1
#   {prefix}       a DPDK --file-prefix unique to this process
#   {mtu}          the --mtu value (payload bytes per data packet)
# The server prints a line "cells: ready" on stdout once a client may start
# (within 20 s), serves one client and exits. The client measures for
# {duration} s and prints on stdout one line
#   ping-pong ({outstanding} 1):  cells: rtps=<round trips/s> p50_us=<RTT> p999_us=<RTT>
#   otherwise:                    cells: mps=<messages/s> gbps=<goodput, 10^9 bit/s>
# and exits 0. A non-zero exit, a missing line, or a line "cells: fail
# <reason>" is a failed run: the table says FAIL and lists the reason (the
# "cells: fail" text, or the last line of the client's, then the server's,
# stderr). Each process gets duration + 25 s, then SIGTERM, then SIGKILL.
#
# The built-in columns use the same contract: they run
# "dpdk-cells.sh --adapter TRANSPORT" with the placeholders above, which
# runs `metaroce perf` and turns its perftest table into the cells line (its
# latency samples are half round trips: RTT is twice them; round trips/s is
# the sample count over the duration). Its exit status is perf's, so a
# failed work request (perf exits non-zero) is a failed run even when perf
# printed a partial table.
set -uo pipefail

die() { printf 'dpdk-cells: %s\n' "$*" >&2; exit 2; }
log() { printf 'dpdk-cells: %s\n' "$*" >&2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
self="$here/$(basename "${BASH_SOURCE[0]}")"

# A frame is the payload plus at most 76 bytes of transport headers and
# trailer (metaroce's are 70 at most, wire version 2) plus Ethernet, IPv4
# and UDP (42): what the adapter's buffers and the veth MTU allow for.
frame_over=118

# ---- adapter: one end of one run of metaroce perf, printing the contract --
adapter() {
	local transport=$1 role=$2 size=$3 outst=$4 dur=$5 backend=$6 core=$7 sock=$8 iface=$9
	shift 9
	local ip=$1 peer=$2 port=$3 prefix=$4 bin=$5 huge=$6
	local prof vdev test
	# Globals (not local): the EXIT trap runs after the function returned.
	adir=$(mktemp -d -t dpdk-cells-adapter.XXXXXX) || exit 2
	local dir=$adir
	trap 'rm -rf "$adir"' EXIT
	prof="$dir/profile.yaml"
	local dev=net_memif0 mtu=${MR_CELLS_MTU:-1024}
	# room is what a buffer must hold (frame_over, above). Frames spread
	# over several memif buffers were corrupted now and then once the
	# ring filled (docs/dpdk.md), and a frame over af_packet's framesz is
	# cut, so each holds a whole frame.
	local frame=$((mtu + frame_over)) room dataroom=2176 ibmtu=4096
	room=$(((frame + 1023) / 1024 * 1024))
	[ $((room + 128)) -gt $dataroom ] && dataroom=$((room + 128))
	while [ $ibmtu -gt 256 ] && [ $ibmtu -gt "$mtu" ]; do ibmtu=$((ibmtu / 2)); done
	vdev="net_memif0,role=$role,id=0,socket=$sock"
	[ $room -gt 2048 ] && vdev+=",bsize=$room"
	if [ "$backend" = af_packet ]; then
		dev=net_af_packet0
		vdev="net_af_packet0,iface=$iface"
		# af_packet refuses a queue whose frames (less its tpacket
		# header) do not fit an mbuf, and the kernel wants blocks of
		# whole pages: frames of room bytes, four to a block.
		[ $room -gt 2048 ] && vdev+=",framesz=$room,blocksz=$((4 * room))"

	fi
	cat >"$prof" <<-EOF
		name: cells-$role
		backend: dpdk
		dpdk:
		  ports:
		    - name: $dev
		      ip: $ip/24
		  pool_size: 8191
		  data_room: $dataroom
		metaroce:
		  mtu: $mtu
		rocev2:
		  mtu: $ibmtu
		  # perftest's default (4.096 us x 2^14 = 67 ms): the baseline as
		  # its users run it. At the core's default 8 (1 ms x 8 tries) a
		  # process descheduled for 9 ms or more on a shared host fails
		  # the QP, as IBA RC specifies (rocev2/stall_test.go).
		  ack_timeout_code: 14
	EOF
	local -a eal=(--lcores "0@$core" --no-pci --no-telemetry --file-prefix "$prefix"
		--log-level lib.eal:error --log-level pmd.net.memif:error --log-level pmd.net.af_packet:error --vdev "$vdev")
	if [ "$huge" = on ]; then
		eal+=(--in-memory -m 256)
	else
		eal+=(--no-huge -m 256)
	fi
	local -a args=() sets=()
	# The harness's --set options (MR_CELLS_SET, one KEY=VALUE a line).
	local kv
	while IFS= read -r kv; do [ -n "$kv" ] && sets+=(--set "$kv"); done <<<"${MR_CELLS_SET:-}"
	case "$outst" in
	1) test=send_lat ;;
	*) if [ "$size" -le 64 ]; then test=send_bw; else test=write_bw; fi
		args=(-t "$outst" --report_gbits) ;;
	esac
	if [ "$role" = server ]; then
		"$bin" perf "$test" --profile "$prof" "${sets[@]}" --transport "$transport" -p "$port" --wait 20s --progress never \
			-- "${eal[@]}" >"$dir/out" 2>"$dir/err" &
		apid=$!
		trap 'kill -TERM $apid 2>/dev/null; wait $apid; rm -rf "$adir"' EXIT
		trap 'exit 143' TERM INT
		for _ in $(seq 400); do
			grep -q "Waiting for client" "$dir/out" 2>/dev/null && { echo "cells: ready"; break; }
			kill -0 $apid 2>/dev/null || break
			sleep 0.05
		done
		wait $apid
		local rc=$?
		cat "$dir/out" "$dir/err" >&2
		trap 'rm -rf "$adir"' EXIT
		return $rc
	fi
	"$bin" perf "$test" 127.0.0.1 --profile "$prof" "${sets[@]}" --transport "$transport" -p "$port" -s "$size" -D "$dur" \
		--progress never "${args[@]}" -- "${eal[@]}" >"$dir/out" 2>"$dir/err"
	local rc=$?
	# perf's table, then its error: the harness reports the last line.
	cat "$dir/out" "$dir/err" >&2
	[ $rc -eq 0 ] || return $rc
	if [ "$outst" = 1 ]; then
		# t_typical and the 99.9th percentile are half round trips.
		awk -v d="$dur" '/t_typical\[usec\]/ { getline; printf "cells: rtps=%.0f p50_us=%.2f p999_us=%.2f\n", $2/d, 2*$5, 2*$9; found=1 }
			END { exit !found }' "$dir/out" || { echo "cells: fail no latency row in perf's output"; return 1; }
	else
		awk '/BW average\[Gb\/sec\]/ { getline; printf "cells: mps=%.0f gbps=%.3f\n", $5*1e6, $4; found=1 }
			END { exit !found }' "$dir/out" || { echo "cells: fail no bandwidth row in perf's output"; return 1; }
	fi
}

if [ "${1:-}" = --adapter ]; then
	shift
	[ $# -eq 15 ] || die "--adapter: want 15 arguments, got $#"
	adapter "$@"
	exit $?
fi

# ---- options ---------------------------------------------------------------
bin=bin/metaroce runs=3 dur=2 backends=memif,af_packet transports=metaroce,rocev2
cells=pp,rate,g32k,g1m other="" oname=other cores=0,1 huge=auto keep="" kernelrx=off
export MR_CELLS_SET="" MR_CELLS_MTU=1024
while [ $# -gt 0 ]; do
	case "$1" in
	--bin) bin=$2; shift ;;
	--runs) runs=$2; shift ;;
	--duration) dur=$2; shift ;;
	--backends) backends=$2; shift ;;
	--transports) transports=$2; shift ;;
	--cells) cells=$2; shift ;;
	--other) other=$2; shift ;;
	--other-name) oname=$2; shift ;;
	--cores) cores=$2; shift ;;
	--huge) huge=$2; shift ;;
	--mtu) MR_CELLS_MTU=$2; shift ;;
	--keep) keep=$2; shift ;;
	--kernel-rx) kernelrx=$2; shift ;;
	--set) [[ "$2" == *=* ]] || die "--set $2: want KEY=VALUE"; MR_CELLS_SET+="$2"$'\n'; shift ;;
	--tiny) runs=1 dur=1 backends=memif ;;
	-h | --help) sed -n '2,/^set -uo/p' "$self" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option $1 (--help)" ;;
	esac
	shift
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "--runs $runs: want a positive integer"
[[ "$dur" =~ ^[1-9][0-9]*$ ]] || die "--duration $dur: want a positive integer (seconds)"
[[ "$cores" =~ ^[0-9]+,[0-9]+$ ]] || die "--cores $cores: want A,B"
[[ "$MR_CELLS_MTU" =~ ^[1-9][0-9]*$ ]] && [ "$MR_CELLS_MTU" -ge 256 ] && [ "$MR_CELLS_MTU" -le 9000 ] ||
	die "--mtu $MR_CELLS_MTU: want an integer from 256 to 9000 (payload bytes per packet)"
case "$kernelrx" in on | off) ;; *) die "--kernel-rx $kernelrx: want on or off" ;; esac
score=${cores%,*} ccore=${cores#*,}
[ -x "$bin" ] || die "$bin: not an executable (go build -tags dpdk -o bin/metaroce ./cmd/metaroce)"
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
for t in taskset timeout setsid awk; do command -v $t >/dev/null || die "$t not found"; done
IFS=, read -r -a BACKENDS <<<"$backends"
IFS=, read -r -a TRANSPORTS <<<"$transports"
IFS=, read -r -a CELLS <<<"$cells"
for b in "${BACKENDS[@]}"; do case "$b" in memif | af_packet) ;; *) die "--backends: unknown $b" ;; esac; done
for t in "${TRANSPORTS[@]}"; do case "$t" in metaroce | rocev2) ;; *) die "--transports: unknown $t" ;; esac; done
for c in "${CELLS[@]}"; do case "$c" in pp | rate | g32k | g1m) ;; *) die "--cells: unknown $c" ;; esac; done
IMPLS=("${TRANSPORTS[@]}")
[ -n "$other" ] && IMPLS+=("$oname")
[ ${#IMPLS[@]} -gt 0 ] || die "nothing to run: no --transports and no --other"
case "$huge" in
auto)
	free=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages 2>/dev/null || echo 0)
	if [ "$free" -ge 300 ] && grep -q hugetlbfs /proc/mounts; then huge=on; else huge=off; fi ;;
on | off) ;;
*) die "--huge $huge: want auto, on or off" ;;
esac

# ---- cleanup ---------------------------------------------------------------
work=$(mktemp -d /tmp/dpdk-cells.XXXXXX) || die "mktemp"
mkdir -p "$work/tmp" # the commands' TMPDIR: removed with the rest
ns="" pgids=() prefixes=()
cleanup() {
	local g _
	# TERM first (perf and the adapter end cleanly), KILL what is left.
	for g in "${pgids[@]}"; do kill -TERM -- "-$g" 2>/dev/null; done
	for _ in $(seq 30); do
		local alive=0
		for g in "${pgids[@]}"; do kill -0 -- "-$g" 2>/dev/null && alive=1; done
		[ $alive = 1 ] || break
		sleep 0.1
	done
	for g in "${pgids[@]}"; do kill -KILL -- "-$g" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "$ns" ] && ip netns del "$ns" 2>/dev/null
	for g in "${prefixes[@]}"; do rm -rf "/var/run/dpdk/$g"; done
	if [ -n "$keep" ]; then mkdir -p "$keep" && cp -r "$work"/. "$keep"/; fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

if [[ " ${BACKENDS[*]} " == *" af_packet "* ]]; then
	[ "$(id -u)" -eq 0 ] || die "af_packet over veth needs root (network namespaces); --backends memif runs without"
	ns="mrcells$$" vethmtu=$((MR_CELLS_MTU + frame_over > 1500 ? MR_CELLS_MTU + frame_over : 1500))
	ip netns add "$ns" || { ns=""; die "ip netns add failed"; }
	ip -n "$ns" link set lo up &&
		ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 &&
		ip -n "$ns" link add cellsA type veth peer name cellsB &&
		ip -n "$ns" link set cellsA mtu "$vethmtu" && ip -n "$ns" link set cellsB mtu "$vethmtu" &&
		ip -n "$ns" link set cellsA up && ip -n "$ns" link set cellsB up ||
		die "cannot build the veth pair in namespace $ns"
	# The veths have no addresses, yet the kernel's stack still takes
	# every frame af_packet's PMD sends: ip_rcv, a route lookup that
	# allocates a dst, a drop, all inside the sender's sendto, on its
	# core (9% of the CPU of a 32 KiB run in perf). A netdev ingress
	# chain runs after the packet taps, so the PMD still receives every
	# frame and the kernel none; its counter goes in the table's header.
	if [ "$kernelrx" = off ]; then
		command -v nft >/dev/null || die "nft not found (scripts/install-deps.sh installs nftables; or --kernel-rx on)"
		printf 'table netdev cells {\n chain in {\n  type filter hook ingress devices = { cellsA, cellsB } priority 0; policy accept;\n  counter drop\n }\n}\n' |
			ip netns exec "$ns" nft -f - || die "nft: cannot add the ingress drop in namespace $ns (or --kernel-rx on)"
	fi
fi

# ---- one run ---------------------------------------------------------------
cell_size() { case $1 in pp | rate) echo 64 ;; g32k) echo 32768 ;; g1m) echo 1048576 ;; esac; }
cell_outst() { case $1 in pp) echo 1 ;; rate) echo 32 ;; g32k) echo 8 ;; g1m) echo 2 ;; esac; }

port=$((20000 + $$ % 20000))
next_port() {
	while :; do
		port=$((port + 1))
		[ $port -lt 60000 ] || port=20001
		if ! ss -Htln "sport = :$port" 2>/dev/null | grep -q .; then return; fi
	done
}

# subst CMD ROLE: CMD with the placeholders of this run and role.
subst() {
	local c=$1 role=$2 core ip peer iface
	if [ "$role" = server ]; then core=$score ip=$ipS peer=$ipC iface=cellsA; else core=$ccore ip=$ipC peer=$ipS iface=cellsB; fi
	c=${c//\{role\}/$role} c=${c//\{size\}/$size} c=${c//\{outstanding\}/$outst} c=${c//\{duration\}/$dur}
	c=${c//\{backend\}/$backend} c=${c//\{core\}/$core} c=${c//\{sock\}/$sock} c=${c//\{iface\}/$iface}
	c=${c//\{ip\}/$ip} c=${c//\{peer_ip\}/$peer} c=${c//\{port\}/$port} c=${c//\{prefix\}/mrcells$$-$seq-$role}
	c=${c//\{mtu\}/$MR_CELLS_MTU}
	printf '%s' "$c"
}

# start ROLE CMD OUT ERR: runs CMD pinned, bounded, in its own process
# group (and in the namespace for af_packet); sets $started to its pid.
start() {
	local role=$1 cmd=$2 core=$score
	[ "$role" = client ] && core=$ccore
	local -a pre=()
	[ "$backend" = af_packet ] && pre=(ip netns exec "$ns")
	TMPDIR=$work/tmp setsid "${pre[@]}" timeout -k 3 $((dur + 25)) taskset -c "$core" bash -c "$cmd" >"$3" 2>"$4" </dev/null &
	started=$!
	pgids+=("$started")
}

# near_ns: a run is "near" when the cores' one-way cache-line latency was
# under this many ns before and after it (their bands here: 30 to 55 ns
# sharing a cache, 160 to 220 ns not; docs/dpdk.md).
near_ns=100

# corelat: the median one-way cache-line latency between the server's
# and the client's cores, in ns (metaroce corelat, a few ms), or nothing
# when it cannot be measured: in 2 s at most, as on a loaded machine a hop
# can wait for a time slice.
corelat() {
	timeout 2 "$bin" corelat --cores "$score,$ccore" --rounds 3 --trips 5000 2>/dev/null |
		awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "median_ns") print kv[2] } }'
}

seq=0
# run_one IMPL CMD RESFILE: one run; writes "ok VALUES" or "fail REASON".
run_one() {
	local impl=$1 cmd=$2 res=$3 d
	seq=$((seq + 1))
	next_port
	d="$work/run$seq"
	mkdir -p "$d"
	echo "$impl $backend $cell run; size $size outstanding $outst" >"$d/what"
	# The two cores' cache-line latency right before the run: a shared
	# VM's vCPU placement moves every cross-core figure (docs/dpdk.md).
	local cl
	cl=$(corelat)
	prefixes+=("mrcells$$-$seq-server" "mrcells$$-$seq-client")
	start server "$(subst "$cmd" server)" "$d/s.out" "$d/s.err"
	local spid=$started ready=0
	for _ in $(seq 400); do
		if grep -q '^cells: ready' "$d/s.out" 2>/dev/null; then ready=1; break; fi
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.05
	done
	local crc=1
	if [ $ready = 1 ]; then
		start client "$(subst "$cmd" client)" "$d/c.out" "$d/c.err"
		wait "$started"
		crc=$?
	fi
	# The server serves one client and exits; give it a moment, then end it.
	for _ in $(seq 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.05; done
	kill -TERM -- "-$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	local srvrc=$?
	# Again after the run: placement can change within seconds. A run
	# is "near" when both are under near_ns, "far" when both are at or
	# above, "mixed" otherwise.
	local cla
	cla=$(corelat)
	echo "${cl:--} ${cla:--}" >"$d/corelat"
	awk -v a="${cl:--}" -v b="${cla:--}" -v t=$near_ns 'BEGIN { if (a == "-" || b == "-") print "-"; else if (a < t && b < t) print "near";
		else if (a >= t && b >= t) print "far"; else print "mixed" }' >"${res/\/res./\/cl.}"
	local line reason
	line=$(grep -a '^cells: ' "$d/c.out" 2>/dev/null | grep -v '^cells: ready' | tail -1)
	if [ $ready = 0 ]; then
		reason="server not ready (rc $srvrc): $(lastline "$d/s.err")"
	elif [ $crc -eq 124 ] || [ $crc -eq 137 ]; then
		reason="client timed out after $((dur + 25)) s"
	elif [[ "$line" == "cells: fail"* ]]; then
		reason=${line#cells: fail }
	elif [ $crc -ne 0 ]; then
		reason="client rc $crc: $(lastline "$d/c.err")"
		[ -n "$(lastline "$d/c.err")" ] || reason="client rc $crc; server: $(lastline "$d/s.err")"
	elif [ -z "$line" ]; then
		reason="client printed no cells line"
	fi
	if [ -n "${reason:-}" ]; then
		echo "fail $reason" >"$res"
		log "  $impl $backend $cell: FAIL: $reason"
		return
	fi
	local v
	if [ "$outst" = 1 ]; then
		v=$(awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); m[kv[1]] = kv[2] } }
			END { if (m["rtps"] == "" || m["p50_us"] == "" || m["p999_us"] == "") exit 1; print m["rtps"], m["p50_us"], m["p999_us"] }' <<<"$line")
	else
		local key=gbps
		[ "$cell" = rate ] && key=mps
		v=$(awk -v k=$key '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); m[kv[1]] = kv[2] } }
			END { if (m[k] == "") exit 1; print m[k] }' <<<"$line")
	fi
	if [ -z "$v" ]; then
		echo "fail cells line lacks a value: $line" >"$res"
		log "  $impl $backend $cell: FAIL: bad cells line: $line"
		return
	fi
	echo "ok $v" >"$res"
	log "  $impl $backend $cell: $v (core-to-core ${cl:--} ns before, ${cla:--} after)"
}

# lastline FILE: its last non-empty line that is not the --no-huge warning.
lastline() { grep -av -e '^\s*$' -e 'anonymous memory (--no-huge)' "$1" 2>/dev/null | tail -1 | cut -c1-160; }

declare -A FAILS
notes=()
for backend in "${BACKENDS[@]}"; do
	if [ "$backend" = memif ]; then ipS=10.95.0.1 ipC=10.95.0.2; else ipS=10.95.1.1 ipC=10.95.1.2; fi
	for impl in "${IMPLS[@]}"; do
		if [ -n "$other" ] && [ "$impl" = "$oname" ]; then
			cmd=$other
		else
			cmd="$(printf '%q' "$self") --adapter $impl {role} {size} {outstanding} {duration} {backend} {core} {sock} {iface} {ip} {peer_ip} {port} {prefix} $(printf '%q' "$bin") $huge"
		fi
		for cell in "${CELLS[@]}"; do
			size=$(cell_size "$cell") outst=$(cell_outst "$cell")
			for r in $(seq "$runs"); do
				sock="$work/memif$seq.sock"
				log "$impl $backend $cell run $r/$runs"
				run_one "$impl" "$cmd" "$work/res.$impl.$backend.$cell.$r"
			done
		done
	done
done

# ---- the table -------------------------------------------------------------
# median FIELD FILES...: the median of field FIELD over the ok results
# (the mean of the two middle ones for an even count).
median() {
	local f=$1
	shift
	[ $# -gt 0 ] || return 1
	cat "$@" 2>/dev/null | awk -v f=$((f + 1)) '$1 == "ok" { print $f }' | mid
}

# mid: the median of the numbers on stdin, one per line (the mean of the
# two middle ones for an even count); fails when there are none.
mid() {
	sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

fmt_val() { # KIND VALUE
	case $1 in
	rate) awk -v v="$2" 'BEGIN { if (v >= 1e6) printf "%.3f M", v / 1e6; else if (v >= 1e3) printf "%.1f K", v / 1e3; else printf "%.0f", v }' ;;
	us) awk -v v="$2" 'BEGIN { printf "%.1f", v }' ;;
	gbps) awk -v v="$2" 'BEGIN { printf "%.2f Gb/s", v }' ;;
	esac
}

# selected IMPL BACKEND CELL: the result files of that cell, one per line;
# with SEL=near only those of runs whose cores shared a cache before and
# after the run.
SEL=
selected() {
	local f
	for f in "$work"/res."$1"."$2"."$3".*; do
		[ -e "$f" ] || continue
		if [ "$SEL" = near ] && [ "$(cat "${f/\/res./\/cl.}" 2>/dev/null)" != near ]; then continue; fi
		printf '%s\n' "$f"
	done
}

note=0
# cellval IMPL BACKEND CELL ROW: sets CV to the table's text for one cell
# (not in a subshell: it numbers the failure notes).
cellval() {
	local impl=$1 b=$2 c=$3 row=$4 files=() nfail=0 n=0 f
	while read -r f; do
		[ -n "$f" ] || continue
		files+=("$f")
		n=$((n + 1))
		if [ "$(cut -d' ' -f1 "$f")" = fail ]; then nfail=$((nfail + 1)); fi
	done < <(selected "$impl" "$b" "$c")
	[ $n -gt 0 ] || { CV='n/a'; return; }
	local key="$impl.$b.$c" ref=""
	if [ $nfail -gt 0 ]; then
		if [ -z "${FAILS[$key]:-}" ]; then
			note=$((note + 1))
			FAILS[$key]=$note
			local reasons
			reasons=$(for f in "${files[@]}"; do awk '$1 == "fail" { $1 = ""; print substr($0, 2) }' "$f"; done | sort | uniq -c | awk '{ c = $1; $1 = ""; printf "%s%dx%s", (NR > 1 ? "; " : ""), c, $0 }')
			notes+=("[$note] $impl $b $(cell_name "$c"): $nfail of $n runs failed: $reasons")
		fi
		ref="[${FAILS[$key]}]"
	fi
	if [ $nfail -eq $n ]; then CV="FAIL $ref"; return; fi
	local v
	case $row in
	rtps) v=$(fmt_val rate "$(median 1 "${files[@]}")") ;;
	rtt) v="$(fmt_val us "$(median 2 "${files[@]}")") / $(fmt_val us "$(median 3 "${files[@]}")") us" ;;
	mps) v=$(fmt_val rate "$(median 1 "${files[@]}")") ;;
	gbps) v=$(fmt_val gbps "$(median 1 "${files[@]}")") ;;
	esac
	if [ $nfail -gt 0 ]; then v="$v ($nfail/$n FAIL $ref)"; fi
	CV=$v
}

cell_name() { case $1 in pp) echo "64 B ping-pong" ;; rate) echo "64 B x32" ;; g32k) echo "32 KiB x8" ;; g1m) echo "1 MiB x2" ;; esac; }

# ratio A B ROW: A/B of the medians (metaroce over the other), "-" when either failed.
ratio() {
	local a b fa fb
	mapfile -t fa < <(selected "$1" "$3" "$5")
	mapfile -t fb < <(selected "$2" "$3" "$5")
	a=$(median "$4" "${fa[@]}" 2>/dev/null) || { printf -- '-'; return; }
	b=$(median "$4" "${fb[@]}" 2>/dev/null) || { printf -- '-'; return; }
	awk -v a="$a" -v b="$b" 'BEGIN { if (b == 0) printf "-"; else printf "%.2f", a / b }'
}

# print_table: the Markdown table of the runs SEL selects.
print_table() {
	hdr="| cell |" sep="|---|"
	for b in "${BACKENDS[@]}"; do
		for i in "${IMPLS[@]}"; do hdr+=" $i $b |" sep+="---|"; done
		if [ -n "$other" ] && [[ " ${TRANSPORTS[*]} " == *" metaroce "* ]]; then hdr+=" metaroce/$oname $b |" sep+="---|"; fi
	done
	echo "$hdr"
	echo "$sep"
	rows=()
	for c in "${CELLS[@]}"; do
		case $c in
		pp) rows+=("pp:rtps:64 B ping-pong, round trips/s:1" "pp:rtt:64 B ping-pong RTT p50 / p99.9:2") ;;
		rate) rows+=("rate:mps:64 B, 32 outstanding, messages/s:1") ;;
		g32k) rows+=("g32k:gbps:32 KiB, 8 outstanding:1") ;;
		g1m) rows+=("g1m:gbps:1 MiB, 2 outstanding:1") ;;
		esac
	done
	for spec in "${rows[@]}"; do
		IFS=: read -r c row title field <<<"$spec"
		line="| $title |"
		for b in "${BACKENDS[@]}"; do
			for i in "${IMPLS[@]}"; do cellval "$i" "$b" "$c" "$row"; line+=" $CV |"; done
			if [ -n "$other" ] && [[ " ${TRANSPORTS[*]} " == *" metaroce "* ]]; then line+=" $(ratio metaroce "$oname" "$b" "$field" "$c") |"; fi
		done
		echo "$line"
	done
}

{
	printf '\n'
	printf 'dpdk-cells: %s, %s, %d cores, %s; %d run(s) of %d s per cell, medians; cores %s (server,client); hugepages %s\n' \
		"$(date -u '+%Y-%m-%d %H:%M UTC')" "$(hostname)" "$(nproc)" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" \
		"$runs" "$dur" "$cores" "$huge"
	printf 'MTU %d (payload bytes per data packet of the built-in columns)\n' "$MR_CELLS_MTU"
	[ -n "$MR_CELLS_SET" ] && printf 'profile keys set: %s\n' "$(printf '%s' "$MR_CELLS_SET" | tr '\n' ' ')"
	if [[ " ${BACKENDS[*]} " == *" af_packet "* ]]; then
		if [ "$kernelrx" = off ]; then
			printf 'af_packet: kernel receive on the veths: dropped at ingress, %s frames\n' \
				"$(ip netns exec "$ns" nft list chain netdev cells in 2>/dev/null | awk '/counter packets/ { for (i = 1; i < NF; i++) if ($i == "packets") print $(i+1) }')"
		else
			printf 'af_packet: kernel receive on the veths: on (--kernel-rx on)\n'
		fi
	fi
	printf 'load average at the end: %s\n\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
	print_table
	# Each run's cores, by their one-way cache-line latency before and
	# after it (metaroce corelat). memif figures drop 2 to 3 times when
	# the two cores do not share a cache (docs/dpdk.md), so when some
	# runs were not "near", the table follows again with near runs only.
	near_runs=0 other_runs=0
	for f in "$work"/cl.*; do
		[ -e "$f" ] || continue
		if [ "$(cat "$f")" = near ]; then near_runs=$((near_runs + 1)); else other_runs=$((other_runs + 1)); fi
	done
	cls=$(cat "$work"/run*/corelat 2>/dev/null | tr ' ' '\n' | grep -v '^-$' | sort -g)
	if [ -n "$cls" ]; then
		printf '\ncore-to-core latency around each run (metaroce corelat, one way, before and after): %d measurements, min %.0f, median %.0f, max %.0f ns\n' \
			"$(wc -l <<<"$cls")" "$(head -1 <<<"$cls")" "$(mid <<<"$cls")" "$(tail -1 <<<"$cls")"
		printf 'runs whose cores shared a cache before and after (both under %d ns): %d of %d\n' $near_ns "$near_runs" $((near_runs + other_runs))
		if [ $other_runs -gt 0 ] && [ $near_runs -gt 0 ]; then
			printf '\nNear-core runs only (medians of the runs above whose cores shared a cache):\n\n'
			SEL=near print_table
		fi
	fi
	if [ ${#notes[@]} -gt 0 ]; then
		printf '\nFailed runs:\n'
		printf '%s\n' "${notes[@]}"
	fi
}
