package profileload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadEnvOverrides: a METAROCE_* variable overrides the file and is
// named as the value's origin; the embedded default is used without a file.
func TestLoadEnvOverrides(t *testing.T) {
	t.Setenv("METAROCE_VERBS_IP", "127.0.0.7")
	t.Setenv("METAROCE_UDP_LOSS", "0.25")
	l, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(l.Name, "(embedded)") {
		t.Errorf("name %q, want the embedded default", l.Name)
	}
	if l.Config.Verbs.IP != "127.0.0.7" || l.Config.UDP.Loss != 0.25 {
		t.Errorf("verbs.ip %q, udp.loss %v: the environment did not apply", l.Config.Verbs.IP, l.Config.UDP.Loss)
	}
	if l.Origin["verbs.ip"] != "METAROCE_VERBS_IP" || l.Origin["udp.loss"] != "METAROCE_UDP_LOSS" {
		t.Errorf("origins %v", l.Origin)
	}
	if err := l.ValidateError(); err != nil {
		t.Fatal(err)
	}
}

// TestLoadErrors: an unknown key, a bad variable and an invalid value each
// give one line naming the key (and the variable it came from).
func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("udp:\n  nosuch: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), "unknown key udp.nosuch") {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
	t.Setenv("METAROCE_VERBS_PORT", "x")
	if _, err := Load(""); err == nil || !strings.Contains(err.Error(), "METAROCE_VERBS_PORT (key verbs.port") {
		t.Errorf("bad variable: %v", err)
	}
	t.Setenv("METAROCE_VERBS_PORT", "70000")
	l, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ValidateError(); err == nil || !strings.Contains(err.Error(), "key verbs.port (from METAROCE_VERBS_PORT)") {
		t.Errorf("out of range: %v", err)
	}
	if strings.Contains(l.ValidateError().Error(), "\n") {
		t.Errorf("error spans lines: %q", l.ValidateError())
	}
}
