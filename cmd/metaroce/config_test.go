package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

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
		!reflect.DeepEqual(embedded.RoCEv2, fromFile.RoCEv2) || embedded.Backend != profile.BackendUDP {
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
		func(p *perfParams) { p.Verify, p.Bidir = true, true },
		func(p *perfParams) { p.Verify, p.Sizes = true, []int{2, 4} },
		func(p *perfParams) { p.Verify, p.Test = true, "send_lat" },
		func(p *perfParams) { p.Verify, p.Sizes = true, []int{8 << 20} }, // 512 slots of 8 MiB
	} {
		p := ok
		p.Sizes = append([]int(nil), ok.Sizes...)
		mut(&p)
		if p.validate() == nil {
			t.Errorf("%+v: no error", p)
		}
	}
}

// The transports' keys are the cores' own (their Config tags), the same
// names as in the experiment files: set, validated by the core and, when
// misspelled or given an old name, reported with the key and the file.
func TestProfileCoreKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "p.yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f := write("metaroce:\n  keepalive_interval: 5ms\n  path_window: 32\nrocev2:\n  dcqcn:\n    cnp_interval: 20us\n    g: 0.01\n")
	cfg, _, err := loadConfig(configFlags{profile: f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m, r := cfg.Metaroce.Core(), cfg.RoCEv2.Core(); m.KeepaliveInterval != 5*time.Millisecond || m.PathWindow != 32 ||
		r.DCQCN.CNPInterval != 20*time.Microsecond || r.DCQCN.G != 0.01 {
		t.Fatalf("metaroce %+v\nrocev2 %+v", m, r)
	}
	for body, want := range map[string]string{
		"metaroce:\n  path_windwo: 8\n":         "unknown key metaroce.path_windwo",
		"metaroce:\n  window: 8\n":              "unknown key metaroce.window",
		"rocev2:\n  dcqcn: true\n":              "key rocev2.dcqcn: is a section",
		"rocev2:\n  dcqcn:\n    g: 2\n":         "key rocev2.dcqcn.g: is 2",
		"metaroce:\n  keepalive_interval: 1s\n": "key metaroce.keepalive_interval: is 1s must be below PeerDeadTimeout",
	} {
		f := write(body)
		_, _, err := loadConfig(configFlags{profile: f}, nil)
		if err == nil || !strings.Contains(err.Error(), f) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want the file and %q", body, err, want)
		}
	}
}

// TestProfilePeerDeadAndKeepalive: a loaded host is made more tolerant
// from the profile: metaroce.peer_dead_timeout and keepalive_interval
// reach the core's Config (the defaults, 200ms and 10ms, when unset).
func TestProfilePeerDeadAndKeepalive(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(p, []byte("metaroce:\n  peer_dead_timeout: 2s\n  keepalive_interval: 50ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := loadConfig(configFlags{profile: p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Metaroce.Core(); m.PeerDeadTimeout != 2*time.Second || m.KeepaliveInterval != 50*time.Millisecond {
		t.Fatalf("peer dead %v, keepalive %v", m.PeerDeadTimeout, m.KeepaliveInterval)
	}
	def, _, err := loadConfig(configFlags{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := def.Metaroce.Core().Defaults()
	if m.PeerDeadTimeout != 200*time.Millisecond || m.KeepaliveInterval != 10*time.Millisecond {
		t.Fatalf("defaults: peer dead %v, keepalive %v", m.PeerDeadTimeout, m.KeepaliveInterval)
	}
}
