package main

import (
	"errors"
	"testing"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// windowRunner keeps depth posts outstanding, as bwRunner does, and
// records what each step did. A recording fake, not a node: what is under
// test is the order of one step, which a real run shows only as a rate
// (a post after the completions that made room for it waits a whole
// backend idle wait: send_bw -t 4 over UDP ran at about 4 K messages/s).
type windowRunner struct {
	depth, outstanding, posted int
	events                     []string
	err                        error
}

func (r *windowRunner) pump() {
	r.events = append(r.events, "pump")
	for r.outstanding < r.depth {
		r.outstanding++
		r.posted++
	}
}

func (r *windowRunner) onWC(verbs.WorkCompletion) {
	r.events = append(r.events, "wc")
	r.outstanding--
}

func (r *windowRunner) finished() bool     { return false }
func (r *windowRunner) result() perfResult { return perfResult{} }
func (r *windowRunner) stop()              {}
func (r *windowRunner) failure() error     { return r.err }

// A step takes its completions before it posts: the room two completions
// make in a full window is filled in the same step.
func TestDriveStepPostsIntoRoomItsCompletionsMade(t *testing.T) {
	r := &windowRunner{depth: 4}
	require.NoError(t, driveStep(r, nil))
	require.Equal(t, 4, r.posted, "the first step fills the window")
	r.events = nil
	require.NoError(t, driveStep(r, make([]verbs.WorkCompletion, 2)))
	require.Equal(t, []string{"wc", "wc", "pump"}, r.events)
	require.Equal(t, 6, r.posted, "both freed places were posted into in the same step")
	require.Equal(t, r.depth, r.outstanding)

	r.err = errors.New("work request failed")
	require.ErrorIs(t, driveStep(r, nil), r.err, "a runner's failure ends the step with it")
}
