package verbslib_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSealedPingpong: ibv_rc_pingpong -c (every byte checked) between two
// processes of the library in security.mode auth and encrypt, with the
// PSK from a file named by METAROCE_SECURITY_PSK_FILE: the library derives
// each connection's keys from the PSK and both ends' CONNECT and ACCEPT
// hellos (docs/security.md).
func TestSealedPingpong(t *testing.T) {
	iters := regexp.MustCompile(`(?m)^(\d+) iters in ([0-9.]+) seconds = ([0-9.]+) usec/iter$`)
	psk := filepath.Join(t.TempDir(), "psk")
	if err := os.WriteFile(psk, []byte("the library's pre-shared key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"auth", "encrypt"} {
		t.Run(mode, func(t *testing.T) {
			env := []string{"METAROCE_SECURITY_MODE=" + mode, "METAROCE_SECURITY_PSK_FILE=" + psk}
			s, c := pairEnv(t, env, "ibv_rc_pingpong", "127.0.0.1", "127.0.0.2", "-g", "0", "-n", "200", "-c")
			for side, out := range map[string]string{"server": s, "client": c} {
				if m := iters.FindStringSubmatch(out); m == nil || m[1] != "200" {
					t.Errorf("%s reports no 200 iterations:\n%s", side, out)
				}
			}
		})
	}
}

// TestSealedNeedsPSK: in auth mode the library reads its PSK, so a
// missing file makes the device fail with the key named, without hanging:
// the mode is not silently none.
func TestSealedNeedsPSK(t *testing.T) {
	dir := libDir(t)
	out, err := run(t, dir, "ibv_rc_pingpong", []string{"METAROCE_SECURITY_MODE=auth",
		"METAROCE_SECURITY_PSK_FILE=" + filepath.Join(t.TempDir(), "absent"), "METAROCE_VERBS_IP=127.0.0.2"},
		"-g", "0", "-p", freeTCPPort(t), "127.0.0.1")
	if err == nil || !strings.Contains(out, "security.psk_file") {
		t.Fatalf("ibv_rc_pingpong without its PSK file: %v\n%s", err, out)
	}
}
