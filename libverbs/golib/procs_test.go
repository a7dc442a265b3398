package main

import (
	"os"
	"runtime"
	"testing"
)

// procsFor raises GOMAXPROCS to minProcs on two CPUs or more, and leaves
// the user's value, a larger one, and one CPU's alone.
func TestProcsFor(t *testing.T) {
	cases := []struct {
		cur, cpus int
		envSet    bool
		want      int
	}{
		{2, 2, false, minProcs},
		{4, 4, false, minProcs},
		{1, 1, false, 1},
		{2, 2, true, 2},
		{64, 64, false, 64},
		{minProcs, 16, false, minProcs},
	}
	for _, c := range cases {
		if got := procsFor(c.cur, c.cpus, c.envSet); got != c.want {
			t.Errorf("procsFor(%d, %d CPUs, env set %v) = %d, want %d", c.cur, c.cpus, c.envSet, got, c.want)
		}
	}
}

// raiseProcs applies it to the runtime (init already did, in this test
// binary too), and honours GOMAXPROCS in the environment.
func TestRaiseProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	t.Setenv("GOMAXPROCS", "1") // restored after the test
	runtime.GOMAXPROCS(1)
	if got := raiseProcs(); got != 1 || runtime.GOMAXPROCS(0) != 1 {
		t.Fatalf("GOMAXPROCS=1 in the environment: raiseProcs = %d, GOMAXPROCS %d; want 1", got, runtime.GOMAXPROCS(0))
	}
	if err := os.Unsetenv("GOMAXPROCS"); err != nil {
		t.Fatal(err)
	}
	want := procsFor(1, runtime.NumCPU(), false)
	if got := raiseProcs(); got != want || runtime.GOMAXPROCS(0) != want {
		t.Fatalf("from 1 on %d CPUs: raiseProcs = %d, GOMAXPROCS %d; want %d", runtime.NumCPU(), got, runtime.GOMAXPROCS(0), want)
	}
}
