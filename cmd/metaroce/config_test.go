package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/configs"
	"github.com/metaroce/metaroce/profile"
)

// TestProfilesLoad: every documented profile in configs/ loads and
// validates (the experiments in configs/experiments are the simulator's).
func TestProfilesLoad(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("%v %v", files, err)
	}
	for _, f := range files {
		cfg, _, err := loadConfig(configFlags{profile: f}, nil)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if cfg.Name != filepath.Base(f[:len(f)-len(".yaml")]) {
			t.Errorf("%s: name %q", f, cfg.Name)
		}
	}
}

func TestEmbeddedDefaultIsTheFile(t *testing.T) {
	fromFile, _, err := loadConfig(configFlags{profile: "../../configs/loopback-udp.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	embedded, name, err := loadConfig(configFlags{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if name != configs.DefaultName+" (embedded)" || embedded.Name != fromFile.Name || embedded.UDP != fromFile.UDP ||
		embedded.RoCEv2 != fromFile.RoCEv2 || embedded.Backend != profile.BackendUDP {
		t.Fatalf("embedded %+v\nfile %+v", embedded, fromFile)
	}
}

// A dpdk section is checked with the engine's own rules when the backend
// is dpdk: one line naming the profile key.
func TestDPDKSectionChecked(t *testing.T) {
	cfg := profile.Default()
	cfg.Backend = profile.BackendDPDK
	for want, mut := range map[string]func(*profile.DPDK){
		"key dpdk.ports: at least one port": func(d *profile.DPDK) {},
		"key dpdk.ports[0].ip":              func(d *profile.DPDK) { d.Ports = []profile.DPDKPort{{Name: "net_memif0", IP: "10.0.0"}} },
		"key dpdk.checksum":                 func(d *profile.DPDK) { d.Checksum = "maybe" },
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

func TestPerfParamsValidate(t *testing.T) {
	ok := perfParams{Test: "write_bw", Transport: profile.TransportMetaroce, Sizes: []int{65536}, Iters: 10, QPs: 1, TxDepth: 128, RxDepth: 512}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for _, mut := range []func(*perfParams){
		func(p *perfParams) { p.Test = "atomic_bw" },
		func(p *perfParams) { p.Transport = "iwarp" },
		func(p *perfParams) { p.Sizes = nil },
		func(p *perfParams) { p.Sizes = []int{1 << 30} },
		func(p *perfParams) { p.QPs = 0 },
		func(p *perfParams) { p.QPs = 64; p.Sizes = []int{8 << 20} },
		func(p *perfParams) { p.TxDepth = 0 },
		func(p *perfParams) { p.Paths = 300 },
	} {
		p := ok
		p.Sizes = append([]int(nil), ok.Sizes...)
		mut(&p)
		if p.validate() == nil {
			t.Errorf("%+v: no error", p)
		}
	}
}
