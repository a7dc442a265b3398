#!/usr/bin/env bash
# install-deps.sh: install the Debian 12 packages that building, testing and
# running metaroce need. Idempotent: when every package is already installed
# it only runs dpkg-query and exits, without touching apt.
#
# Must run as root (apt-get). When not root it re-executes itself with sudo if
# sudo exists, and otherwise stops with a clear error.
#
# To add a dependency, append it to PACKAGES below (one per line, with why).
set -euo pipefail

PACKAGES=(
	# build and test
	git
	make
	gcc
	pkg-config
	# DPDK data path (cgo/, dpdk/, mempool/, lcore/)
	libdpdk-dev
	dpdk
	# packet captures and the Wireshark dissector checks
	tshark
	# independent RoCEv2 ICRC check (scapy.contrib.roce) in test/rocev2conformance
	python3-scapy
	# kernel fabric in network namespaces: impairments and ECMP
	nftables
	iproute2
	# libibverbs-compatible library (build/verbs): the reference ABI
	# (objdump -T of Debian's libibverbs.so.1), the headers its C sources and
	# tests compile against, and the unmodified verbs programs it must run
	libibverbs1
	libibverbs-dev
	ibverbs-utils
	perftest
)

log() { printf 'install-deps: %s\n' "$*" >&2; }

# installed NAME: true when dpkg reports the package fully installed. `dpkg -s`
# alone also succeeds for removed packages whose config files remain, so the
# status string is checked.
installed() {
	[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]
}

missing=()
for p in "${PACKAGES[@]}"; do
	installed "$p" || missing+=("$p")
done

if [ "${#missing[@]}" -eq 0 ]; then
	log "all ${#PACKAGES[@]} packages already installed"
else
	if [ "$(id -u)" -ne 0 ]; then
		if command -v sudo >/dev/null 2>&1; then
			log "not root: re-running with sudo"
			exec sudo -- "$0" "$@"
		fi
		log "error: missing packages (${missing[*]}) and not running as root; run as root or install sudo"
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	# tshark's postinst asks whether non-root users may capture; answer "no"
	# up front so the install never waits for a terminal.
	echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
	log "installing: ${missing[*]}"
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}"
	for p in "${missing[@]}"; do
		installed "$p" || { log "error: $p still not installed"; exit 1; }
	done
	log "done"
fi

# Go does not come from the Debian archive (bookworm ships 1.19); a go
# command of any version works, since go.mod's toolchain line makes it fetch
# the required release from the Go module proxy.
if ! command -v go >/dev/null 2>&1; then
	log "warning: no go command in PATH; install Go (https://go.dev/dl/) to build metaroce"
fi
