package corelat

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// twoCPUs returns two CPUs this process may run on, or skips.
func twoCPUs(t *testing.T) (int, int) {
	t.Helper()
	var s unix.CPUSet
	if err := unix.SchedGetaffinity(0, &s); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := 0; c < 1024 && len(cpus) < 2; c++ {
		if s.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		t.Skip("needs two CPUs in the process's mask")
	}
	return cpus[0], cpus[1]
}

// TestMeasure takes a real measurement between two CPUs: a hop takes some
// time, less than the whole run, and the caller's CPU mask is as before.
func TestMeasure(t *testing.T) {
	a, b := twoCPUs(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	// Few trips and a long limit: under a loaded make test a hop can wait
	// for a time slice, and this test checks the mechanism, not the speed.
	const trips = 200
	start := time.Now()
	hop, err := Measure(a, b, trips, 60*time.Second)
	el := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if hop <= 0 || hop*2*trips > el {
		t.Fatalf("one hop %v over %d round trips in %v: want more than 0 and at most the whole run", hop, trips, el)
	}
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		t.Fatal(err)
	}
	if before != after {
		t.Fatalf("CPU mask %v after the measurement, was %v", after, before)
	}
	t.Logf("CPUs %d and %d: %v one way", a, b, hop)
}

// TestMeasureRefuses: the same CPU twice, a CPU outside the mask and no
// trips are errors, not a hang.
func TestMeasureRefuses(t *testing.T) {
	var s unix.CPUSet
	if err := unix.SchedGetaffinity(0, &s); err != nil {
		t.Fatal(err)
	}
	outside := -1
	for c := 0; c < 1024; c++ {
		if !s.IsSet(c) {
			outside = c
			break
		}
	}
	cases := []struct {
		name        string
		a, b, trips int
	}{
		{"same CPU", 0, 0, 10},
		{"no trips", 0, 1, 0},
		{"negative CPU", -1, 0, 10},
		{"CPU outside the mask, peer", 0, outside, 10},
		{"CPU outside the mask, caller", outside, 0, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Measure(tc.a, tc.b, tc.trips, time.Second); err == nil {
				t.Fatalf("Measure(%d, %d, %d) = nil error", tc.a, tc.b, tc.trips)
			}
		})
	}
}
