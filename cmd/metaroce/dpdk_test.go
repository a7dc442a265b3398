//go:build dpdk

package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/profile"
)

// dpdkBuilt: this test binary has the DPDK engine.
const dpdkBuilt = true

// refusedWithoutDPDK: with the engine, no profile is refused for naming it.
func refusedWithoutDPDK(error) bool { return false }

// A dpdk section is checked with the engine's own rules when the backend
// is dpdk: one line naming the profile key.
func TestDPDKSectionChecked(t *testing.T) {
	cfg := profile.Default()
	cfg.Backend = profile.BackendDPDK
	for want, mut := range map[string]func(*profile.DPDK){
		"key dpdk.ports: at least one port": func(d *profile.DPDK) {},
		"key dpdk.ports[0].ip":              func(d *profile.DPDK) { d.Ports = []profile.DPDKPort{{Name: "net_memif0", IP: "10.0.0"}} },
		"key dpdk.checksum":                 func(d *profile.DPDK) { d.Checksum = "maybe" },
		"key dpdk.udp_checksum":             func(d *profile.DPDK) { d.UDPChecksum = "sometimes" },
		"key dpdk.impair.loss":              func(d *profile.DPDK) { d.Impair.Loss = 1 },
		"key dpdk.neighbours[0].mac":        func(d *profile.DPDK) { d.Neighbours = []profile.DPDKNeighbour{{Peer: 1, IP: "10.0.0.2", MAC: "zz"}} },
		"key dpdk.ports[1].name: \"a\" listed twice": func(d *profile.DPDK) {
			d.Ports = []profile.DPDKPort{{Name: "a", IP: "10.0.0.1"}, {Name: "a", IP: "10.0.0.2"}}
		},
	} {
		c := cfg
		c.DPDK = profile.DPDK{Ports: []profile.DPDKPort{{Name: "net_memif0", IP: "10.0.0.1"}}}
		if want == "key dpdk.ports: at least one port" {
			c.DPDK.Ports = nil
		}
		mut(&c.DPDK)
		err := checkDPDK(c, "p.yaml")
		var ce *configError
		if !errors.As(err, &ce) || !strings.Contains(ce.msg, "metaroce: p.yaml: "+want) || strings.Contains(ce.msg, "\n") {
			t.Errorf("%s: got %v", want, err)
		}
	}
	ok := cfg
	ok.DPDK = profile.DPDK{Ports: []profile.DPDKPort{{Name: "net_memif0", IP: "10.0.0.1/24"}}}
	if err := checkDPDK(ok, "p.yaml"); err != nil {
		t.Fatal(err)
	}
}

// dpdk.udp_checksum left empty follows the transport: zero for metaroce
// (its CRC32C covers every packet), compute for the rocev2 baseline; a
// value given, or the older checksum: none, wins.
func TestUDPChecksumFollowsTransport(t *testing.T) {
	d := profile.DPDK{Ports: []profile.DPDKPort{{Name: "net_memif0", IP: "10.0.0.1"}}}
	for _, tc := range []struct {
		tr            profile.Transport
		checksum, udp string
		want          string
	}{
		{profile.TransportMetaroce, "", "", "zero"},
		{profile.TransportRoCEv2, "", "", "compute"},
		{profile.TransportMetaroce, "", "compute", "compute"},
		{profile.TransportRoCEv2, "", "zero", "zero"},
		{profile.TransportRoCEv2, "none", "", "zero"},
	} {
		d.Checksum, d.UDPChecksum = tc.checksum, tc.udp
		c := engineConfig(d, 0, 1, tc.tr)
		if c.UDPChecksum != tc.want {
			t.Errorf("%+v: udp_checksum %q", tc, c.UDPChecksum)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", tc, err)
		}
	}
}
