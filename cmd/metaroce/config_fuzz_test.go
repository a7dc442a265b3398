package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadConfig: any profile file either loads into a valid Config or
// fails with a one-line configError; it never panics.
func FuzzLoadConfig(f *testing.F) {
	for _, s := range []string{
		"backend: udp\n", "udp:\n  loss: 0.5\n", "udp: 3\n", "bench:\n  sweep:\n    size: [1, x]\n",
		"metaroce: {paths: 1e9}\n", "udp:\n  lsos: 1\n", "bench:\n  duration: 5\n", ":\n-",
		"backend: dpdk\ndpdk:\n  ports: [{name: net_memif0, ip: 10.0.0.1/24, queues: 2}]\n  impair: {loss: 0.1}\n",
		"backend: dpdk\ndpdk:\n  ports: [{name: a, ip: 10.0.0.1}, {name: a}]\n  neighbours: [{peer: 1, ip: x, mac: y}]\n",
		"dpdk:\n  ports: [[1]]\n  eal: [--no-huge, 3]\n  idle_spin: 2\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "p.yaml")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := loadConfig(configFlags{profile: p}, nil)
		if err == nil {
			if verr := cfg.Validate(); verr != nil {
				t.Fatalf("loaded but invalid: %v", verr)
			}
			return
		}
		var ce *configError
		if !errors.As(err, &ce) || strings.Contains(ce.msg, "\n") {
			t.Fatalf("%T %q", err, err)
		}
	})
}
