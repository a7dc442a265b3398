package engine_test

import (
	"errors"
	"github.com/metaroce/metaroce/verbs"
	"testing"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/engine/udp"
)

// The backends that need no cgo implement the one interface (the DPDK
// engine asserts it in its own package, which needs libdpdk).
var (
	_ engine.Backend = (*udp.Backend)(nil)
	_ engine.Backend = (*mempair.End)(nil)
)

// TestAppFunc: AppFunc passes the clock in and done and the error out.
func TestAppFunc(t *testing.T) {
	boom := errors.New("boom")
	var seen verbs.Time
	var app engine.App = engine.AppFunc(func(now verbs.Time) (bool, error) {
		seen = now
		return now > 5, boom
	})
	done, err := app.Step(7)
	if !done || !errors.Is(err, boom) || seen != 7 {
		t.Fatalf("Step(7) = %v, %v (saw %d), want true, boom, 7", done, err, seen)
	}
	if done, _ := app.Step(3); done {
		t.Fatal("Step(3) done")
	}
}
