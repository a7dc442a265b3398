package metaroce

import (
	"bytes"
	"testing"
	"time"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// TestWriteLastBytePlacedLast: the chunk carrying a WRITE's last byte
// arrives first (the others are delayed); a program polling the last byte
// sees it only once every other byte is in place.
func TestWriteLastBytePlacedLast(t *testing.T) {
	r := newWindowRig(t, Config{Paths: 4, MTU: 1024})
	w := r.w
	const wlen = 8*1024 - 100
	w.extra = func(from int, pkt []byte) verbs.Time {
		var h Header
		var m MsgHeader
		if from == 0 && h.Decode(pkt) == nil && h.Opcode == OpWrite && msgOf(&h, &m, pkt) &&
			m.Offset+uint32(m.PayloadLen) < wlen {
			return verbs.Time(50 * time.Microsecond)
		}
		return 0
	}
	r.write(t, 1, 0, wlen, 0)
	polled := 0
	w.runUntil(t, func() bool {
		if r.dst[wlen-1] != r.src[wlen-1] {
			polled++
			return false
		}
		return true
	}, w.now+verbs.Time(time.Second))
	require.True(t, bytes.Equal(r.src[:wlen], r.dst[:wlen]), "the last byte landed before the rest")
	require.NotZero(t, polled)
	require.Equal(t, uint64(1), r.cb.Counters().LastChunksHeld, "the last chunk did not arrive first")
	r.quiesce(w.now + verbs.Time(10*time.Millisecond))
	require.Equal(t, uint64(wlen), r.cb.Counters().PayloadPlaced)
	require.Zero(t, r.cb.heldN)
	require.Len(t, r.cb.heldPool, 1)
}

// TestHeldLastChunkReleasedOnTeardown: a last chunk held back returns to
// the pool when its queue pair is destroyed, and one beyond maxHeldChunks
// is not acknowledged (the sender resends it).
func TestHeldLastChunkReleasedOnTeardown(t *testing.T) {
	r := newWindowRig(t, Config{Paths: 2, MTU: 1024})
	w := r.w
	w.drop = func(from int, pkt []byte) bool {
		var h Header
		var m MsgHeader
		return from == 0 && h.Decode(pkt) == nil && h.Opcode == OpWrite && msgOf(&h, &m, pkt) && m.Offset == 0
	}
	r.write(t, 1, 0, 4096, 0)
	r.quiesce(w.now + verbs.Time(200*time.Microsecond))
	require.Equal(t, 1, r.cb.heldN)
	require.Zero(t, r.dst[4095], "the last byte was placed before the first chunk")
	require.NoError(t, r.qb.Destroy(w.now))
	require.Zero(t, r.cb.heldN)

	r2 := newWindowRig(t, Config{Paths: 2, MTU: 1024})
	r2.w.drop = w.drop
	r2.cb.heldN = maxHeldChunks
	r2.write(t, 1, 0, 4096, 0)
	r2.quiesce(r2.w.now + verbs.Time(200*time.Microsecond))
	require.NotZero(t, r2.cb.Counters().LastChunksRefused)
	require.Zero(t, r2.dst[4095])
	r2.w.drop = nil
	r2.cb.heldN = 0
	r2.w.runUntil(t, func() bool { return len(poll(r2.cqa)) == 1 }, r2.w.now+verbs.Time(time.Second))
	require.Equal(t, r2.src[:4096], r2.dst[:4096])
	require.Equal(t, uint64(4096), r2.cb.Counters().PayloadPlaced)
}
