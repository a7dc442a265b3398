package verbs

import "time"

// RetryInterval is how long a handshake waits after its attempt n (1 for
// the first request, 2 for the first retry, ...) before the next: base
// doubled n-1 times, but never more than limit (and never less than base).
//
// Why doubling: a connection's first answer may be lost (a dropped packet
// costs one base interval) or late because the peer is not running (a
// process descheduled on a loaded host, a listener still starting). A
// fixed short interval spends every attempt inside one such stall; the
// doubling keeps the first retries quick and spreads the later ones over
// a budget (ConnectRetries attempts) long enough to outlast the stall.
func RetryInterval(base, limit time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return max(base, min(d, limit))
}

// RetryBudget is how long a handshake of tries attempts (the request and
// tries-1 retries, each followed by its RetryInterval) waits in all before
// it gives up.
func RetryBudget(base, limit time.Duration, tries int) time.Duration {
	var sum time.Duration
	for n := 1; n <= tries; n++ {
		sum += RetryInterval(base, limit, n)
	}
	return sum
}
