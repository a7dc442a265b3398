package dissector

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/test/internal/binary"
	"github.com/metaroce/metaroce/test/internal/testenv"
)

// TestTsharkDecodesSealedCapture: a perf write_bw capture in
// security.mode auth and encrypt read back through the dissector. Every
// packet shows SEALED; CONNECT its hello and PSK MAC, connection packets
// their tag and a packet number that grows by one per packet on each path
// (docs/protocol.md §17); auth WRITEs still show their message extension
// and payload, encrypt ones only an enciphered body of the same length.
func TestTsharkDecodesSealedCapture(t *testing.T) {
	tshark := testenv.Tool(t, "tshark", "Debian package tshark; scripts/install-deps.sh installs it (make deps)")
	lua := filepath.Join(repoRoot(t), "tools", "wireshark", "metaroce.lua")
	bin := binary.Build(t)
	psk := filepath.Join(t.TempDir(), "psk")
	if err := os.WriteFile(psk, []byte("the dissector test's pre-shared key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"auth", "encrypt"} {
		t.Run(mode, func(t *testing.T) {
			capFile := filepath.Join(t.TempDir(), "write.pcap")
			s, c := binary.LoopbackPair()
			env := append(os.Environ(), "METAROCE_UDP_SERVER_IP="+s, "METAROCE_UDP_CLIENT_IP="+c, "METAROCE_UDP_PORT=0",
				"METAROCE_SECURITY_MODE="+mode, "METAROCE_SECURITY_PSK_FILE="+psk)
			port := strconv.Itoa(binary.FreePort(t))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			srv := exec.CommandContext(ctx, bin, "perf", "write_bw", "-p", port, "--wait", "30s")
			srv.Env = env
			var srvOut bytes.Buffer
			srv.Stdout, srv.Stderr = &srvOut, &srvOut
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			const msgs, size, paths = 8, 10000, 4
			// As in TestTsharkDecodesCapture: a first flight over every
			// path, and one packet per datagram, whatever the host's timing.
			cl := exec.CommandContext(ctx, bin, "perf", "write_bw", "127.0.0.1", "-p", port, "-n", strconv.Itoa(msgs),
				"-s", strconv.Itoa(size), "--paths", strconv.Itoa(paths), "--pcap", capFile,
				"--set", "metaroce.initial_inflight="+strconv.Itoa(paths), "--set", "udp.coalesce=1")
			cl.Env = env
			clOut, err := cl.CombinedOutput()
			if err != nil {
				srv.Process.Kill()
				srv.Wait()
				t.Fatalf("client: %v\n%s", err, clOut)
			}
			if err := srv.Wait(); err != nil {
				t.Fatalf("server: %v\n%s", err, srvOut.String())
			}
			portIn := func(out, ip string) string {
				m := regexp.MustCompile(`local address: ` + regexp.QuoteMeta(ip) + `:(\d+)`).FindStringSubmatch(out)
				if m == nil {
					t.Fatalf("no local address %s in:\n%s", ip, out)
				}
				return m[1]
			}
			srvPort, clPort := portIn(srvOut.String(), s), portIn(string(clOut), c)
			fields := func(filter string, f ...string) [][]string {
				args := []string{"-X", "lua_script:" + lua, "-o", "metaroce.udp_port:" + srvPort, "-d", "udp.port==" + clPort + ",metaroce",
					"-r", capFile, "-Y", filter, "-T", "fields", "-E", "separator=|"}
				for _, x := range f {
					args = append(args, "-e", x)
				}
				out, err := exec.Command(tshark, args...).Output()
				if err != nil {
					t.Fatalf("tshark %v: %v", args, err)
				}
				var rows [][]string
				for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
					if l != "" {
						r := strings.Split(l, "|")
						for len(r) < len(f) {
							r = append(r, "") // trailing empty fields
						}
						rows = append(rows, r)
					}
				}
				return rows
			}
			all := fields("metaroce", "metaroce.flags.sealed", "metaroce.flags.encrypted")
			for _, r := range all {
				if r[0] != "True" && r[0] != "1" {
					t.Fatalf("a packet without SEALED: %v", r)
				}
				if enc := r[1] == "True" || r[1] == "1"; enc != (mode == "encrypt") {
					t.Fatalf("ENCRYPTED %s in mode %s", r[1], mode)
				}
			}
			if conn := fields("metaroce.opcode == 0x20", "metaroce.hello", "metaroce.psk_mac", "metaroce.connect.paths"); len(conn) == 0 ||
				len(conn[0][0]) != 32 || len(conn[0][1]) != 32 || conn[0][2] != strconv.Itoa(paths) {
				t.Fatalf("CONNECT decoded as %v", conn)
			}
			writes := fields("metaroce.opcode == 0x01 && metaroce.flags.retransmit == 0", "metaroce.path_id", "metaroce.pn",
				"metaroce.tag", "metaroce.payload_len", "metaroce.ciphertext")
			if want := msgs * 3; len(writes) != want {
				t.Fatalf("%d first-transmission WRITEs, want %d", len(writes), want)
			}
			payload := 0
			for _, w := range writes {
				if len(w[2]) != 32 {
					t.Fatalf("WRITE tag %q", w[2])
				}
				if mode == "auth" {
					if w[3] == "" || w[4] != "" {
						t.Fatalf("auth WRITE: payload_len %q, ciphertext %d hex digits", w[3], len(w[4]))
					}
					n, _ := strconv.Atoi(w[3])
					payload += n
				} else {
					ext := mr.MsgExtLen(mr.OpWrite, 0) // 10000-byte messages: no FlagSolo
					if w[3] != "" || len(w[4]) < 2*ext {
						t.Fatalf("encrypt WRITE: payload_len %q in clear, ciphertext %d hex digits", w[3], len(w[4]))
					}
					payload += len(w[4])/2 - ext // the enciphered message extension
				}
			}
			if payload != msgs*size {
				t.Fatalf("%d payload bytes in the WRITEs, want %d", payload, msgs*size)
			}
			// The client's packet numbers, per path: 1, 2, 3, ... in order.
			next := map[string]uint64{}
			for _, r := range fields("metaroce && udp.dstport == "+srvPort+" && metaroce.opcode != 0x20 && metaroce.opcode != 0x23 && metaroce.opcode != 0x25",
				"metaroce.path_id", "metaroce.pn") {
				pn, err := strconv.ParseUint(r[1], 10, 64)
				if err != nil {
					t.Fatalf("pn %q: %v", r[1], err)
				}
				if next[r[0]] == 0 {
					next[r[0]] = 1
				}
				if pn != next[r[0]] {
					t.Fatalf("path %s: pn %d, want %d", r[0], pn, next[r[0]])
				}
				next[r[0]]++
			}
			if len(next) != paths {
				t.Fatalf("packet numbers on %d paths, want %d", len(next), paths)
			}
		})
	}
}
