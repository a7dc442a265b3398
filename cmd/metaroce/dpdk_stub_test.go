//go:build !dpdk

package main

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/profile"
)

// dpdkBuilt: this test binary has no DPDK engine (built without -tags dpdk).
const dpdkBuilt = false

// refusedWithoutDPDK reports whether err is the refusal of backend dpdk.
func refusedWithoutDPDK(err error) bool {
	var ce *configError
	return errors.As(err, &ce) && strings.HasSuffix(ce.msg, ": key backend: dpdk: "+noDPDK)
}

// Without the tag, backend dpdk is a configuration error naming the file,
// the key and the fix, whatever the dpdk section holds; other backends
// pass.
func TestDPDKRefusedWithoutTag(t *testing.T) {
	cfg := profile.Default()
	if err := checkDPDK(cfg, "p.yaml"); err != nil {
		t.Fatalf("backend %s: %v", cfg.Backend, err)
	}
	cfg.Backend = profile.BackendDPDK
	for _, d := range []profile.DPDK{{}, {Ports: []profile.DPDKPort{{Name: "net_memif0", IP: "10.0.0.1/24"}}}} {
		cfg.DPDK = d
		err := checkDPDK(cfg, "p.yaml")
		var ce *configError
		if !errors.As(err, &ce) || ce.msg != "metaroce: p.yaml: key backend: dpdk: built without DPDK: rebuild with -tags dpdk" {
			t.Errorf("%+v: got %v", d, err)
		}
		if !refusedWithoutDPDK(err) {
			t.Errorf("refusedWithoutDPDK(%v) = false", err)
		}
	}
	h, err := startDPDK(cfg, nil, false, io.Discard)
	var ce *configError
	if h != nil || !errors.As(err, &ce) || !strings.HasSuffix(ce.msg, noDPDK) {
		t.Fatalf("startDPDK: %v, %v", h, err)
	}
	if err := h.shutdown(); err != nil {
		t.Fatal(err)
	}
}

// Through the command: bench and perf with --backend dpdk exit with the
// configuration error status before running anything.
func TestDPDKBackendFlagWithoutTag(t *testing.T) {
	for _, args := range [][]string{{"bench", "--backend", "dpdk"}, {"perf", "write_bw", "--backend", "dpdk"}} {
		if code := run(args); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}
