package main

import (
	"bytes"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestParseCores(t *testing.T) {
	good := map[string][2]int{"0,1": {0, 1}, " 3 , 2 ": {3, 2}}
	for s, want := range good {
		a, b, err := parseCores(s)
		if err != nil || a != want[0] || b != want[1] {
			t.Errorf("parseCores(%q) = %d, %d, %v; want %v", s, a, b, err, want)
		}
	}
	for _, s := range []string{"", "0", "0,0", "1,-1", "a,b", "0,1,2", ",1"} {
		if _, _, err := parseCores(s); err == nil {
			t.Errorf("parseCores(%q): no error", s)
		}
	}
}

// TestCorelatLine runs the command between CPUs 0 and 1 and checks the
// line the harness parses: every field there, and min <= median <= max.
func TestCorelatLine(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"corelat", "--cores", "0,1", "--rounds", "3", "--trips", "200"})
	if err := cmd.Execute(); err != nil {
		if strings.Contains(err.Error(), "may run on") {
			t.Skipf("CPUs 0 and 1 not both usable here: %v", err)
		}
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^corelat: cores=0,1 median_ns=([0-9.]+) min_ns=([0-9.]+) max_ns=([0-9.]+) rounds=3 trips=200\n$`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("output %q", out.String())
	}
	var v [3]float64
	for i := range v {
		v[i], _ = strconv.ParseFloat(m[i+1], 64)
	}
	if !(v[1] > 0 && v[1] <= v[0] && v[0] <= v[2]) {
		t.Fatalf("median %v, min %v, max %v: want 0 < min <= median <= max", v[0], v[1], v[2])
	}
}
