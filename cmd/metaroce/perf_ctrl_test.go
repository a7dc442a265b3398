package main

import (
	"encoding/json"
	"net"
	"testing"
	"time"
)

// TestTCPCtrlGoneAfterLastMessage: the peer's last message and its close
// arrive together; gone must not report the close while that message is
// still queued (perf's server would fail with "setup connection: EOF"
// instead of reading the client's "done").
func TestTCPCtrlGoneAfterLastMessage(t *testing.T) {
	a, b := net.Pipe()
	c := newTCPCtrl(a)
	go func() {
		_ = json.NewEncoder(b).Encode(ctrlMsg{Type: "done"})
		b.Close()
	}()
	end := time.Now().Add(5 * time.Second)
	for len(c.err) == 0 { // the reader has queued the message, then the error
		if time.Now().After(end) {
			t.Fatal("the reader did not see the close")
		}
		time.Sleep(time.Millisecond)
	}
	if err := c.gone(); err != nil {
		t.Fatalf("gone with a message queued: %v", err)
	}
	m, ok := c.recv()
	if !ok || m.Type != "done" {
		t.Fatalf("recv: %+v %v, want the done message", m, ok)
	}
	if err := c.gone(); err == nil {
		t.Fatal("gone: nil after the last message, want the close")
	}
}
