package main

import (
	"path/filepath"
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
	dpdkRefused := 0
	for _, f := range files {
		cfg, _, err := loadConfig(configFlags{profile: f}, nil)
		if refusedWithoutDPDK(err) {
			dpdkRefused++ // the rest of the profile validated first
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if cfg.Name != filepath.Base(f[:len(f)-len(".yaml")]) {
			t.Errorf("%s: name %q", f, cfg.Name)
		}
	}
	if !dpdkBuilt && dpdkRefused == 0 {
		t.Error("no backend dpdk profile was refused without the dpdk tag")
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
