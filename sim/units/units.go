// Package units holds the experiment files' units: spans of virtual time
// (Duration, "2ms" or "never") and byte counts (Size, "64KiB"), each with
// its YAML decoding. Every layer of the simulator that is configured from
// a file uses them.
package units

import (
	"fmt"
	"github.com/metaroce/metaroce/verbs"
	"math"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a span of virtual time in an experiment file: a Go duration
// string ("2ms", "1.5us", "200ns") or "never" (which only the keys that
// document it accept).
type Duration time.Duration

// NeverDuration is how "never" decodes.
const NeverDuration = Duration(math.MaxInt64)

// UnmarshalYAML parses "2ms", "never" or a bare number of nanoseconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = v
	return nil
}

func parseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "never" {
		return NeverDuration, nil
	}
	if ns, err := strconv.ParseInt(s, 10, 64); err == nil {
		return Duration(ns), nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q (want e.g. 2ms, 1.5us, never)", s)
	}
	return Duration(v), nil
}

// Never reports whether d is "never".
func (d Duration) Never() bool { return d == NeverDuration }

// D converts d to a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// T converts d to a span of metaroce.Time (Never stays Never).
func (d Duration) T() verbs.Time {
	if d.Never() {
		return verbs.Never
	}
	return verbs.Time(d)
}

func (d Duration) String() string {
	if d.Never() {
		return "never"
	}
	return time.Duration(d).String()
}

// Size is a byte count in an experiment file: a number of bytes or a
// number with a unit (B, KB, MB, GB in powers of 1000; KiB, MiB, GiB in
// powers of 1024).
type Size int64

// UnmarshalYAML parses "64KiB", "1MB" or a bare number of bytes.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*s = v
	return nil
}

func parseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1},
	}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || v*mult > math.MaxInt64/2 {
		return 0, fmt.Errorf("bad size %q (want e.g. 4096, 64KiB, 1MB)", s)
	}
	return Size(math.Round(v * mult)), nil
}

func (s Size) String() string {
	switch {
	case s >= 1<<30 && s%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", s>>30)
	case s >= 1<<20 && s%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", s>>20)
	case s >= 1<<10 && s%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", s>>10)
	}
	return fmt.Sprintf("%dB", int64(s))
}
