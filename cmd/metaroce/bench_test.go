package main

import (
	"testing"

	"github.com/metaroce/metaroce/profile"
)

func TestSweepPointsCrossProduct(t *testing.T) {
	cfg := profile.Default()
	pts := sweepPoints(profile.Sweep{Loss: []float64{0, 0.01}, Size: []int{4096, 65536}, Paths: []int{4}, QPs: []int{1, 2}}, cfg)
	if len(pts) != 8 {
		t.Fatalf("%d points", len(pts))
	}
	if pts[0] != (benchPoint{Loss: 0, Size: 4096, Paths: 4, QPs: 1}) || pts[7] != (benchPoint{Loss: 0.01, Size: 65536, Paths: 4, QPs: 2}) {
		t.Fatalf("%+v", pts)
	}
	// Empty lists take the profile's single values.
	cfg.UDP.Loss, cfg.Metaroce.Paths = 0.02, 16
	pts = sweepPoints(profile.Sweep{}, cfg)
	if len(pts) != 1 || pts[0] != (benchPoint{Loss: 0.02, Size: 65536, Paths: 16, QPs: 1}) {
		t.Fatalf("%+v", pts)
	}
}

func TestBenchAxis(t *testing.T) {
	for _, tc := range []struct {
		s    profile.Sweep
		want string
	}{
		{profile.Sweep{Loss: []float64{0, 0.01}}, "injected loss [%]"},
		{profile.Sweep{Loss: []float64{0}, Size: []int{1, 2}}, "message size [B]"},
		{profile.Sweep{Paths: []int{1, 8}}, "paths"},
		{profile.Sweep{QPs: []int{1, 8}}, "queue pairs"},
		{profile.Sweep{Loss: []float64{0, 0.01}, Size: []int{1, 2}}, "injected loss [%]"},
	} {
		if got, _ := benchAxis(tc.s); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.s, got, tc.want)
		}
	}
}
