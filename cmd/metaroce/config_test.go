package main

import (
	"errors"
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

func TestDPDKBackendIsAOneLineError(t *testing.T) {
	cfg := profile.Default()
	cfg.Backend = profile.BackendDPDK
	_, err := openBackendCheck(cfg)
	var ce *configError
	if !errors.As(err, &ce) {
		t.Fatalf("%v", err)
	}
}
