package verbs

import (
	"testing"
	"time"
)

func TestRetryInterval(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		base, limit time.Duration
		n           int
		want        time.Duration
	}{
		{ms, 100 * ms, 1, ms},
		{ms, 100 * ms, 2, 2 * ms},
		{ms, 100 * ms, 7, 64 * ms},
		{ms, 100 * ms, 8, 100 * ms},
		{ms, 100 * ms, 1000, 100 * ms},
		{ms, ms, 5, ms},         // limit = base: a fixed interval
		{5 * ms, ms, 3, 5 * ms}, // limit below base: base
		{ms, 100 * ms, 0, ms},
	} {
		if got := RetryInterval(c.base, c.limit, c.n); got != c.want {
			t.Errorf("RetryInterval(%v, %v, %d) = %v, want %v", c.base, c.limit, c.n, got, c.want)
		}
	}
}

func TestRetryBudget(t *testing.T) {
	ms := time.Millisecond
	// 1+2+4+...+64 = 127 ms for the first 7, then 100 ms each.
	if got, want := RetryBudget(ms, 100*ms, 21), 127*ms+14*100*ms; got != want {
		t.Fatalf("budget %v, want %v", got, want)
	}
	if got := RetryBudget(ms, ms, 16); got != 16*ms {
		t.Fatalf("fixed budget %v, want 16ms", got)
	}
}
