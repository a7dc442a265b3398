package verbslib_test

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/test/internal/testenv"
)

// run runs an unmodified program with the built library and the given
// METAROCE_* environment; it returns stdout+stderr and the error.
func run(t *testing.T, dir, prog string, env []string, args ...string) (string, error) {
	t.Helper()
	path := testenv.Tool(t, prog, "Debian packages ibverbs-utils and perftest; run scripts/install-deps.sh")
	cmd := exec.Command(path, args...)
	cmd.Env = withLib(dir, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestDevices: ibv_devices lists metaroce0 and its GUID, without loading
// the Go transport (the path to it is made invalid: listing still works).
func TestDevices(t *testing.T) {
	dir := libDir(t)
	out, err := run(t, dir, "ibv_devices", []string{"METAROCE_VERBS_GOLIB=/nonexistent/libmetaroce-verbs.so"})
	if err != nil {
		t.Fatalf("ibv_devices: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^\s+metaroce0\s+([0-9a-f]{16})$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("ibv_devices does not list metaroce0 with a GUID:\n%s", out)
	}
	if m[1] == strings.Repeat("0", 16) {
		t.Errorf("node GUID is zero:\n%s", out)
	}
}

// devinfoField returns the value of "\tname:\t...value" in ibv_devinfo's
// output, or "" when absent.
func devinfoField(out, name string) string {
	m := regexp.MustCompile(`(?m)^\t*` + regexp.QuoteMeta(name) + `:\t+(.*)$`).FindStringSubmatch(out)
	if m == nil {
		return ""
	}
	return strings.TrimSpace(m[1])
}

// TestDevinfo: ibv_devinfo -v opens the device (loading the Go transport,
// which reads the profile and the METAROCE_* overrides) and reports one
// active Ethernet port whose GID 0 is the endpoint's IPv4-mapped address,
// RoCE v2; the transport and MTU come from the profile.
func TestDevinfo(t *testing.T) {
	dir := libDir(t)
	cases := []struct {
		name string
		env  []string
		want map[string]string
	}{
		{"default", nil, map[string]string{
			"fw_ver": "metaroce/metaroce", "active_mtu": "4096 (5)", "GID[  0]": "::ffff:127.0.0.1, RoCE v2"}},
		{"overrides", []string{"METAROCE_VERBS_IP=127.0.0.9", "METAROCE_TRANSPORT=rocev2", "METAROCE_ROCEV2_MTU=1024"},
			map[string]string{"fw_ver": "metaroce/rocev2", "active_mtu": "1024 (3)", "GID[  0]": "::ffff:127.0.0.9, RoCE v2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(t, dir, "ibv_devinfo", c.env, "-v")
			if err != nil {
				t.Fatalf("ibv_devinfo -v: %v\n%s", err, out)
			}
			want := map[string]string{
				"hca_id": "metaroce0", "transport": "InfiniBand (0)", "phys_port_cnt": "1",
				"state": "PORT_ACTIVE (4)", "link_layer": "Ethernet", "max_mtu": "4096 (5)",
				"port_lid": "0", "gid_tbl_len": "1", "pkey_tbl_len": "1", "max_sge": "1",
				"max_qp": "255", "max_srq": "0", "atomic_cap": "ATOMIC_NONE (0)", "max_qp_wr": "4096",
			}
			for k, v := range c.want {
				want[k] = v
			}
			for k, v := range want {
				if got := devinfoField(out, k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}

// TestDevinfoBadProfile: a bad override fails ibv_open_device with the
// profile error on stderr, and ibv_devinfo exits non-zero.
func TestDevinfoBadProfile(t *testing.T) {
	dir := libDir(t)
	out, err := run(t, dir, "ibv_devinfo", []string{"METAROCE_VERBS_IP=not-an-ip"})
	if err == nil {
		t.Fatalf("ibv_devinfo succeeded with a bad verbs.ip:\n%s", out)
	}
	if !strings.Contains(out, "verbs.ip") || !strings.Contains(out, "METAROCE_VERBS_IP") {
		t.Fatalf("the error does not name the key and the variable:\n%s", out)
	}
}
