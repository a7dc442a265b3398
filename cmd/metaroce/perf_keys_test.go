package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/profile"
)

// securedProfile is the default profile in mode, with a PSK file.
func securedProfile(t *testing.T, mode, psk string) profile.Config {
	t.Helper()
	cfg := profile.Default()
	cfg.UDP.Port = 0
	cfg.Security.Mode = mode
	if mode != "none" {
		f := filepath.Join(t.TempDir(), "psk")
		if err := os.WriteFile(f, []byte(psk+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.Security.PSKFile = f
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// perfPair runs perf's server and client over UDP loopback with the two
// profiles; it returns the client's results, both nodes' connection
// counters (zero when a side has no connection) and the client's error.
func perfPair(t *testing.T, srv, cli profile.Config, p perfParams) ([]perfResult, [2]mr.ConnCounters, error) {
	t.Helper()
	port := freeTCPPort(t)
	var stopped atomic.Bool
	var out bytes.Buffer
	type sres struct {
		c   mr.ConnCounters
		err error
	}
	done := make(chan sres, 1)
	go func() {
		_, n, _, _, _, err := perfServer(srv, nil, p.Test, port, 10*time.Second, stopped.Load, nil, &out)
		var c mr.ConnCounters
		if n != nil {
			c = connCounters(n)
			n.close()
		}
		done <- sres{c, err}
	}()
	res, n, _, _, err := perfClient(cli, nil, p, "127.0.0.1", port, func() bool { return false }, nil, nil)
	var counts [2]mr.ConnCounters
	if n != nil {
		counts[1] = connCounters(n)
		n.close()
	}
	if err != nil {
		stopped.Store(true)
	}
	select {
	case s := <-done:
		counts[0] = s.c
	case <-time.After(20 * time.Second):
		t.Fatal("server did not stop")
	}
	return res, counts, err
}

func connCounters(n *node) mr.ConnCounters {
	for _, s := range n.sess {
		if ms, ok := s.(mr.Session); ok {
			return *ms.C.Counters()
		}
	}
	return mr.ConnCounters{}
}

// TestPerfSealedWriteBW: write_bw over UDP loopback in every mode, with
// every byte checked where it lands (--verify); in auth and encrypt the
// keys come from perf's X25519 exchange, and no packet fails its tag.
func TestPerfSealedWriteBW(t *testing.T) {
	for _, mode := range []string{"none", "auth", "encrypt"} {
		t.Run(mode, func(t *testing.T) {
			cfg := securedProfile(t, mode, "a pre-shared key of some length")
			cli := cfg
			cli.UDP.ServerIP = "127.0.0.1"
			p := perfParams{Test: "write_bw", Transport: cfg.Transport, Sizes: []int{65536}, Iters: 300, QPs: 1,
				TxDepth: 16, RxDepth: 16, Paths: 4, Verify: true}
			res, c, err := perfPair(t, cfg, cli, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 1 || res[0].Iters < 300 || res[0].BWAvg <= 0 {
				t.Fatalf("results %+v", res)
			}
			for i, cc := range c {
				if cc.RxPackets == 0 {
					t.Fatalf("side %d received nothing: %+v", i, cc)
				}
				if cc.AuthFailures+cc.Replays+cc.ReplaysOld != 0 {
					t.Fatalf("side %d: %d auth failures, %d replays", i, cc.AuthFailures, cc.Replays+cc.ReplaysOld)
				}
			}
		})
	}
}

// TestPerfSealedWrongPSK: a client whose PSK differs is refused on the
// setup channel, before any UDP packet, with a message that says why.
func TestPerfSealedWrongPSK(t *testing.T) {
	srv := securedProfile(t, "encrypt", "the server's pre-shared key")
	cli := securedProfile(t, "encrypt", "another pre-shared key, wrong")
	p := perfParams{Test: "write_bw", Transport: srv.Transport, Sizes: []int{4096}, Iters: 10, QPs: 1, TxDepth: 4, RxDepth: 4, Paths: 2}
	_, c, err := perfPair(t, srv, cli, p)
	if err == nil || !strings.Contains(err.Error(), "psk_file") {
		t.Fatalf("client with a wrong PSK: %v, want a refusal naming security.psk_file", err)
	}
	if c[1].TxPackets != 0 {
		t.Fatalf("the refused client sent %d packets", c[1].TxPackets)
	}
}
