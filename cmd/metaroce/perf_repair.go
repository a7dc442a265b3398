package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/metaroce/metaroce/verbs"
)

// repairStats is one end's loss repair over a perf run, from its
// transport's counters (transportKind.repair): what a perftest user asks
// first when a figure looks low, and what `metaroce stats` cannot read
// once perf has exited. Each end sends its own in the closing "done"
// message, so both ends print both columns.
type repairStats struct {
	Sent   uint64       `json:"sent"`   // data packets sent, first transmissions
	Resent uint64       `json:"resent"` // data packets sent again, any cause
	Causes []repairItem `json:"causes"` // resends (or retry episodes) by cause
	// Lost is what the receiver side of the repair saw missing: metaroce's
	// SACK gaps, RoCEv2's out-of-sequence requests; LostHow names it.
	Lost         uint64 `json:"lost"`
	LostHow      string `json:"lost_how"`
	Duplicates   uint64 `json:"duplicates"`    // data that arrived twice (not placed again)
	PathFailures uint64 `json:"path_failures"` // paths judged failed (metaroce)
	// Failure is why a session failed ("" while none has).
	Failure string `json:"failure,omitempty"`
}

type repairItem struct {
	Cause string `json:"cause"`
	N     uint64 `json:"n"`
}

// repair reads the node's sessions' loss-repair counters (engine
// goroutine only, or after its backend stopped).
func (n *node) repair() repairStats {
	r := n.kind.repair(n.sess)
	if why := n.failReason(); why != verbs.FailNone {
		r.Failure = why.String()
	}
	return r
}

// failReason is why the first of the node's sessions that failed did.
func (n *node) failReason() verbs.FailReason {
	for _, s := range n.sess {
		if why := s.FailReason(); why != verbs.FailNone {
			return why
		}
	}
	return verbs.FailNone
}

// explain adds to a run's error why the connection failed, when one did:
// a failed work request's status (retry exceeded) or a refused post
// (connection closed or failed) does not say whether the peer went
// silent, reset, restarted or refused.
func (n *node) explain(err error) error {
	if err == nil || n == nil || err == errInterrupted {
		return err
	}
	if why := n.failReason(); why != verbs.FailNone {
		return fmt.Errorf("%w: %s connection failed: %v", err, n.name, why)
	}
	return err
}

func (r repairStats) causes() string {
	var b strings.Builder
	for i, c := range r.Causes {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", c.Cause, c.N)
	}
	return b.String()
}

// printRepair prints the closing loss-repair summary: this end and, when
// it reported, the peer, side by side.
func printRepair(w io.Writer, server bool, mine repairStats, peer *repairStats) {
	me, other := "client", "server"
	if server {
		me, other = other, me
	}
	cols := []repairStats{mine}
	head := fmt.Sprintf(" Loss repair     : %-32s", me+" (this end)")
	if peer != nil {
		cols = append(cols, *peer)
		head += " " + other
	}
	row := func(name string, f func(r repairStats) string) {
		line := fmt.Sprintf(" %-16s:", name)
		for i, c := range cols {
			v := f(c)
			if i < len(cols)-1 {
				v = fmt.Sprintf("%-32s", v)
			}
			line += " " + v
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	fmt.Fprintln(w, strings.TrimRight(head, " "))
	row("data sent", func(r repairStats) string { return fmt.Sprint(r.Sent) })
	row("resent", func(r repairStats) string { return fmt.Sprint(r.Resent) })
	row("  by cause", func(r repairStats) string { return r.causes() })
	row("lost", func(r repairStats) string { return fmt.Sprintf("%d (%s)", r.Lost, r.LostHow) })
	row("duplicates", func(r repairStats) string { return fmt.Sprint(r.Duplicates) })
	row("path failures", func(r repairStats) string { return fmt.Sprint(r.PathFailures) })
	for _, c := range cols {
		if c.Failure != "" {
			row("failed", func(r repairStats) string {
				if r.Failure == "" {
					return "-"
				}
				return r.Failure
			})
			break
		}
	}
	fmt.Fprintln(w, resultLine)
}
