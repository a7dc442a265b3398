package verbslib_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/test/internal/testenv"
)

// The unmodified programs the library must run (Debian packages
// ibverbs-utils and perftest). Every rdma-core binary is linked BIND_NOW,
// and perftest also links libmlx5, libefa and librdmacm, which import
// IBVERBS_PRIVATE_34: one unresolved symbol and the program does not start.
var programs = []string{"ib_write_bw", "ib_send_bw", "ib_read_bw", "ib_write_lat", "ib_send_lat",
	"ib_read_lat", "ibv_devices", "ibv_devinfo", "ibv_rc_pingpong"}

// TestProgramsResolve: LD_BIND_NOW=1 ldd -r finds every symbol of every
// program (and the libraries it loads) in the built library.
func TestProgramsResolve(t *testing.T) {
	dir := libDir(t)
	testenv.Tool(t, "ldd", "Debian package libc-bin")
	checked := 0
	for _, p := range programs {
		path := testenv.Tool(t, p, "Debian packages ibverbs-utils and perftest; run scripts/install-deps.sh")
		cmd := exec.Command("ldd", "-r", path)
		cmd.Env = withLib(dir, "LD_BIND_NOW=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("ldd -r %s: %v\n%s", p, err, out)
			continue
		}
		s := string(out)
		if strings.Contains(s, "undefined symbol") || strings.Contains(s, "not found") {
			t.Errorf("%s does not resolve against build/verbs:\n%s", p, s)
			continue
		}
		if !strings.Contains(s, "libibverbs.so.1 => "+dir+"/libibverbs.so.1") {
			t.Errorf("%s did not load build/verbs/libibverbs.so.1:\n%s", p, s)
			continue
		}
		checked++
	}
	if checked != len(programs) {
		t.Fatalf("%d of %d programs resolve", checked, len(programs))
	}
}
