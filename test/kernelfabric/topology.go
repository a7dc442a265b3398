// Package kernelfabric builds a small routed fabric out of Linux network
// namespaces and runs the DPDK transport across it: host A and host B
// (DPDK on veths with af_packet, in one "hosts" namespace) joined through a
// leaf router on each side and 4 spine routers between them, with Linux
// ECMP over the spines hashing on L4 (net.ipv4.fib_multipath_hash_policy=1).
//
//	A(hA0) - leafA - r1..r4 - leafB - (hB0)B
//
// The kernel fabric is slow (~0.15-0.2 Mpps through three forwarding
// hops): it proves behaviour (spraying over real ECMP, nftables loss, link
// failure), not speed.
package kernelfabric

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// Spines is the number of spine routers.
const Spines = 4

// Topology names the namespaces of one fabric. Names carry a prefix unique
// to the creating process, so parallel runs never collide.
type Topology struct {
	Prefix string
}

// NS returns the full name of namespace short ("hosts", "leafA", "leafB",
// "r1".."r4").
func (t Topology) NS(short string) string { return t.Prefix + short }

func (t Topology) all() []string {
	out := []string{t.NS("hosts"), t.NS("leafA"), t.NS("leafB")}
	for i := 1; i <= Spines; i++ {
		out = append(out, t.NS(fmt.Sprintf("r%d", i)))
	}
	return out
}

// Addresses of the fabric.
const (
	HostAIP  = "10.1.0.2"
	HostAGW  = "10.1.0.1"
	HostBIP  = "10.2.0.2"
	HostBGW  = "10.2.0.1"
	HostAIf  = "hA0"
	HostBIf  = "hB0"
	SpineRxA = "ra0" // a spine's interface towards leafA
)

// Run runs a command and returns its combined output, with the command in
// the error.
func Run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// InNS runs a command inside namespace ns.
func (t Topology) InNS(short string, args ...string) (string, error) {
	return Run("ip", append([]string{"netns", "exec", t.NS(short)}, args...)...)
}

// Create builds the fabric. On error, what was made so far is left for
// Destroy (which the caller must always call).
func (t Topology) Create() error {
	for _, ns := range t.all() {
		if _, err := Run("ip", "netns", "add", ns); err != nil {
			return err
		}
	}
	sysctl := func(ns string, kv ...string) error {
		for _, s := range kv {
			if _, err := t.InNS(ns, "sysctl", "-qw", s); err != nil {
				return err
			}
		}
		return nil
	}
	veth := func(nsA, ifA, nsB, ifB string) error {
		_, err := Run("ip", "link", "add", ifA, "netns", t.NS(nsA), "type", "veth", "peer", "name", ifB, "netns", t.NS(nsB))
		return err
	}
	addr := func(ns, ifc, cidr string) error {
		if _, err := Run("ip", "-n", t.NS(ns), "addr", "add", cidr, "dev", ifc); err != nil {
			return err
		}
		_, err := Run("ip", "-n", t.NS(ns), "link", "set", ifc, "up")
		return err
	}
	// Hosts: the DPDK side. No addresses, no forwarding, no IPv6 chatter:
	// the kernel must leave these interfaces to DPDK.
	if err := sysctl("hosts", "net.ipv4.ip_forward=0", "net.ipv4.conf.all.forwarding=0", "net.ipv6.conf.all.disable_ipv6=1",
		"net.ipv6.conf.default.disable_ipv6=1"); err != nil {
		return err
	}
	steps := []func() error{
		func() error { return veth("hosts", HostAIf, "leafA", "a0") },
		func() error { return veth("hosts", HostBIf, "leafB", "b0") },
		func() error { return addr("leafA", "a0", HostAGW+"/24") },
		func() error { return addr("leafB", "b0", HostBGW+"/24") },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	for _, ifc := range []string{HostAIf, HostBIf} {
		if _, err := Run("ip", "-n", t.NS("hosts"), "link", "set", ifc, "up"); err != nil {
			return err
		}
		if err := sysctl("hosts", "net.ipv4.conf."+ifc+".forwarding=0"); err != nil {
			return err
		}
	}
	for _, leaf := range []string{"leafA", "leafB"} {
		if err := sysctl(leaf, "net.ipv4.ip_forward=1", "net.ipv4.fib_multipath_hash_policy=1",
			"net.ipv4.conf.all.ignore_routes_with_linkdown=1", "net.ipv4.conf.default.ignore_routes_with_linkdown=1",
			"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"); err != nil {
			return err
		}
	}
	routeA := []string{"-n", t.NS("leafA"), "route", "add", "10.2.0.0/24"}
	routeB := []string{"-n", t.NS("leafB"), "route", "add", "10.1.0.0/24"}
	for i := 1; i <= Spines; i++ {
		r := fmt.Sprintf("r%d", i)
		if err := sysctl(r, "net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"); err != nil {
			return err
		}
		up, down := fmt.Sprintf("u%d", i), fmt.Sprintf("v%d", i)
		if err := veth("leafA", up, r, SpineRxA); err != nil {
			return err
		}
		if err := veth("leafB", down, r, "rb0"); err != nil {
			return err
		}
		for _, a := range [][3]string{
			{"leafA", up, fmt.Sprintf("10.11.%d.1/24", i)}, {r, SpineRxA, fmt.Sprintf("10.11.%d.2/24", i)},
			{r, "rb0", fmt.Sprintf("10.12.%d.1/24", i)}, {"leafB", down, fmt.Sprintf("10.12.%d.2/24", i)},
		} {
			if err := addr(a[0], a[1], a[2]); err != nil {
				return err
			}
		}
		if _, err := Run("ip", "-n", t.NS(r), "route", "add", "10.1.0.0/24", "via", fmt.Sprintf("10.11.%d.1", i)); err != nil {
			return err
		}
		if _, err := Run("ip", "-n", t.NS(r), "route", "add", "10.2.0.0/24", "via", fmt.Sprintf("10.12.%d.2", i)); err != nil {
			return err
		}
		routeA = append(routeA, "nexthop", "via", fmt.Sprintf("10.11.%d.2", i), "dev", up)
		routeB = append(routeB, "nexthop", "via", fmt.Sprintf("10.12.%d.1", i), "dev", down)
	}
	if _, err := Run("ip", routeA...); err != nil {
		return err
	}
	_, err := Run("ip", routeB...)
	return err
}

// Destroy removes every namespace of the fabric (and with them their
// veths). It tries them all and reports the first failure other than
// "not there".
func (t Topology) Destroy() error {
	var first error
	for _, ns := range t.all() {
		if out, err := Run("ip", "netns", "del", ns); err != nil && !strings.Contains(out, "No such file") && first == nil {
			first = err
		}
	}
	return first
}

// SpineRx returns how many packets each spine received from leafA.
func (t Topology) SpineRx() ([Spines]uint64, error) {
	var out [Spines]uint64
	for i := 1; i <= Spines; i++ {
		s, err := t.InNS(fmt.Sprintf("r%d", i), "cat", "/sys/class/net/"+SpineRxA+"/statistics/rx_packets")
		if err != nil {
			return out, err
		}
		if out[i-1], err = strconv.ParseUint(strings.TrimSpace(s), 10, 64); err != nil {
			return out, err
		}
	}
	return out, nil
}

// AddSpineLoss makes every spine drop a fraction permil/1000 of what it
// forwards, in both directions, with nftables (numgen random mod 1000 <
// permil), counting each direction apart: "ab" from host A's /24 (A's
// data, B's acknowledgements of READ responses), "ba" from host B's.
func (t Topology) AddSpineLoss(permil int) error {
	for i := 1; i <= Spines; i++ {
		if _, err := t.InNS(fmt.Sprintf("r%d", i), "nft", fmt.Sprintf(
			"add table ip mrloss; add chain ip mrloss lossy { type filter hook forward priority 0; policy accept; }; "+
				"add rule ip mrloss lossy ip saddr 10.1.0.0/24 numgen random mod 1000 < %d counter drop comment \"ab\"; "+
				"add rule ip mrloss lossy ip saddr 10.2.0.0/24 numgen random mod 1000 < %d counter drop comment \"ba\"",
			permil, permil)); err != nil {
			return err
		}
	}
	return nil
}

// Drops is what nftables dropped on one spine, by direction.
type Drops struct{ AB, BA uint64 }

var dropRE = regexp.MustCompile(`counter packets (\d+) bytes \d+ drop comment "(ab|ba)"`)

// SpineDrops reads every spine's nftables drop counters (zero for a spine
// without the loss table).
func (t Topology) SpineDrops() ([Spines]Drops, error) {
	var out [Spines]Drops
	for i := 1; i <= Spines; i++ {
		s, err := t.InNS(fmt.Sprintf("r%d", i), "nft", "list", "table", "ip", "mrloss")
		if err != nil {
			if strings.Contains(s, "No such file") {
				continue
			}
			return out, err
		}
		for _, m := range dropRE.FindAllStringSubmatch(s, -1) {
			v, err := strconv.ParseUint(m[1], 10, 64)
			if err != nil {
				return out, err
			}
			if m[2] == "ab" {
				out[i-1].AB = v
			} else {
				out[i-1].BA = v
			}
		}
	}
	return out, nil
}

// RemoveSpineLoss deletes every spine's loss table.
func (t Topology) RemoveSpineLoss() error {
	for i := 1; i <= Spines; i++ {
		if _, err := t.InNS(fmt.Sprintf("r%d", i), "nft", "delete", "table", "ip", "mrloss"); err != nil {
			return err
		}
	}
	return nil
}

// KernelHosts gives hA0 and hB0 their addresses for the kernel's own
// stack (the UDP backend), with scripts/netns-fabric.sh's policy routing:
// what A sends to B leaves by hA0 (and the reverse by hB0) instead of being
// delivered locally, so one process holds both ends and every packet
// crosses the fabric.
func (t Topology) KernelHosts() error {
	h := t.NS("hosts")
	cmds := [][]string{
		{"ip", "netns", "exec", h, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
			"net.ipv4.conf." + HostAIf + ".accept_local=1", "net.ipv4.conf." + HostBIf + ".accept_local=1",
			"net.ipv4.conf." + HostAIf + ".rp_filter=0", "net.ipv4.conf." + HostBIf + ".rp_filter=0"},
		{"ip", "-n", h, "link", "set", "lo", "up"},
		{"ip", "-n", h, "addr", "add", HostAIP + "/24", "dev", HostAIf},
		{"ip", "-n", h, "addr", "add", HostBIP + "/24", "dev", HostBIf},
		{"ip", "-n", h, "route", "add", "default", "via", HostAGW, "dev", HostAIf, "table", "101"},
		{"ip", "-n", h, "route", "add", "default", "via", HostBGW, "dev", HostBIf, "table", "102"},
		{"ip", "-n", h, "rule", "add", "pref", "10", "iif", "lo", "from", HostAIP, "to", "10.2.0.0/24", "lookup", "101"},
		{"ip", "-n", h, "rule", "add", "pref", "11", "iif", "lo", "from", HostBIP, "to", "10.1.0.0/24", "lookup", "102"},
		{"ip", "-n", h, "rule", "add", "pref", "100", "lookup", "local"},
		{"ip", "-n", h, "rule", "del", "pref", "0"},
	}
	for _, c := range cmds {
		if _, err := Run(c[0], c[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// SpineLinkDown takes spine i's link towards leafA down (leafA then
// ignores that nexthop; traffic from B hashed to spine i is lost until the
// transport moves it).
func (t Topology) SpineLinkDown(i int) error {
	_, err := Run("ip", "-n", t.NS(fmt.Sprintf("r%d", i)), "link", "set", SpineRxA, "down")
	return err
}

// SpineLinkUp brings spine i's link towards leafA back.
func (t Topology) SpineLinkUp(i int) error {
	_, err := Run("ip", "-n", t.NS(fmt.Sprintf("r%d", i)), "link", "set", SpineRxA, "up")
	return err
}
