package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metaroce/metaroce/profile"
)

// TestPerfSetupSurvivesHostileClients: perf's server, over loopback,
// meets an idle client, one sending a 500 MB line, and one naming a UDP
// address that is not its own; it refuses each with an error message
// (heap growth bounded, nothing sent to the foreign address) and still
// welcomes the genuine client that comes next.
func TestPerfSetupSurvivesHostileClients(t *testing.T) {
	defer func(d time.Duration) { helloTimeout = d }(helloTimeout)
	helloTimeout = 500 * time.Millisecond
	cfg := profile.Default()
	cfg.UDP.Port, cfg.UDP.ServerIP = 0, "127.0.0.1"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var stopped atomic.Bool
	var out bytes.Buffer
	type result struct{ err error }
	done := make(chan result, 1)
	go func() {
		_, n, _, _, _, err := perfServer(cfg, nil, "write_bw", port, 30*time.Second, stopped.Load, nil, &out)
		if n != nil {
			n.close()
		}
		done <- result{err}
	}()
	dial := func() net.Conn {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); ; {
			c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err == nil {
				return c
			}
			if time.Now().After(end) {
				t.Fatalf("server not listening: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// answer reads the server's first message (within 10 s).
	answer := func(c net.Conn) ctrlMsg {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(c).ReadBytes('\n')
		var m ctrlMsg
		if err != nil || json.Unmarshal(line, &m) != nil {
			t.Fatalf("no answer from the server: %v (%q)", err, line)
		}
		return m
	}
	hello := func(udp string) []byte {
		p := perfParams{Test: "write_bw", Transport: cfg.Transport, Sizes: []int{4096}, Iters: 10, QPs: 1, TxDepth: 1, RxDepth: 1}
		b, _ := json.Marshal(ctrlMsg{Type: "hello", Params: &p, UDP: udp, Mem: &regionInfo{Len: 4096}})
		return append(b, '\n')
	}

	idle := dial()
	if m := answer(idle); m.Type != "error" || !strings.Contains(m.Err, "no \"hello\"") {
		t.Fatalf("idle client: %+v, want an error about the missing hello", m)
	}
	idle.Close()

	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap0 := ms.HeapAlloc
	long := dial()
	go func() {
		chunk := bytes.Repeat([]byte{'x'}, 1<<20)
		for i := 0; i < 500; i++ { // a 500 MB line, no newline
			if _, err := long.Write(chunk); err != nil {
				return // the server closed: it stopped reading
			}
		}
	}()
	if m := answer(long); m.Type != "error" || !strings.Contains(m.Err, "longer than") {
		t.Fatalf("500 MB line: %+v, want an error about its length", m)
	}
	long.Close()
	runtime.ReadMemStats(&ms)
	if grown := int64(ms.HeapAlloc) - int64(heap0); grown > 64<<20 {
		t.Fatalf("heap grew %d MiB on one long line", grown>>20)
	}

	foreign := dial()
	if _, err := foreign.Write(hello("192.0.2.1:4794")); err != nil {
		t.Fatal(err)
	}
	if m := answer(foreign); m.Type != "error" || !strings.Contains(m.Err, "not its TCP address") {
		t.Fatalf("foreign UDP address: %+v, want a refusal", m)
	}
	foreign.Close()

	good := dial()
	defer good.Close()
	if _, err := good.Write(hello("127.0.0.1:40000")); err != nil {
		t.Fatal(err)
	}
	if m := answer(good); m.Type != "welcome" {
		t.Fatalf("genuine client after three bad ones: %+v, want welcome", m)
	}
	stopped.Store(true)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop")
	}
	if got := strings.Count(out.String(), "Refused client"); got != 3 {
		t.Fatalf("%d refusals logged, want 3:\n%s", got, out.String())
	}
}
