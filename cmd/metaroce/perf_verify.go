package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// --verify: the sender fills every message with a pattern derived from
// its queue pair, its index and the offset, and the end that receives the
// bytes checks all of them once the transport says they have arrived:
//
//   - send_bw: the server, at each receive completion (message k of a QP
//     is its k-th receive);
//   - write_bw: the server, once the client is done (a WRITE completes
//     nowhere at the responder): the last message written to each of the
//     QP's TX-depth target slots;
//   - read_bw: the client, at each READ completion, against the pattern
//     the server put in the slot it read (slot i mod TX depth).
//
// Each outstanding message has its own slot (TX depth slots per QP, RX
// depth for receives), so no message's bytes overwrite another's while it
// is in flight. The first wrong byte stops the run with its queue pair,
// message and offset, and perf exits non-zero at both ends.

// patternWord is the pattern's 8 bytes at word w of message m of QP q
// (splitmix64: neighbouring messages and offsets share no byte pattern).
func patternWord(q, m, w int) uint64 {
	x := uint64(q)<<48 ^ uint64(m)<<24 ^ uint64(w)
	x += 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}

// fillPattern writes message m of QP q's pattern into b.
func fillPattern(b []byte, q, m int) {
	var w [8]byte
	for i := 0; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(w[:], patternWord(q, m, i/8))
		copy(b[i:], w[:])
	}
}

// verifyError is the first byte of a message that does not match.
type verifyError struct {
	QP, Msg, Offset int
	Got, Want       byte
}

func (e *verifyError) Error() string {
	return fmt.Sprintf("verify: QP %d message %d: first wrong byte at offset %d: got %#02x, want %#02x",
		e.QP, e.Msg, e.Offset, e.Got, e.Want)
}

// checkPattern checks b against pattern pat of QP q; msg names the
// message in the report (for READ the pattern is the slot's, not the
// message's).
func checkPattern(b []byte, q, msg, pat int) error {
	testCorrupt(b, q, msg)
	var w [8]byte
	for i := 0; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(w[:], patternWord(q, pat, i/8))
		n := copy(w[:], w[:min(8, len(b)-i)])
		for k := 0; k < n; k++ {
			if b[i+k] != w[k] {
				return &verifyError{QP: q, Msg: msg, Offset: i + k, Got: b[i+k], Want: w[k]}
			}
		}
	}
	return nil
}

// corruptEnv is TEST-ONLY: when set to QP:MSG:OFFSET, the checking end
// flips the byte at OFFSET of that message just before checking it, as a
// forged packet would have, so the tests of the real binary can see
// --verify fail (test/cli). Nothing else reads it.
const corruptEnv = "MRPERF_TEST_CORRUPT"

var corruptAt = func() (at [3]int) {
	at[0] = -1
	v := os.Getenv(corruptEnv)
	f := strings.Split(v, ":")
	if len(f) != 3 {
		return at
	}
	for i, s := range f {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			at[0] = -1
			return at
		}
		at[i] = n
	}
	return at
}()

func testCorrupt(b []byte, q, msg int) {
	if at := corruptAt; at[0] == q && at[1] == msg && at[2] < len(b) {
		b[at[2]] ^= 0xFF
	}
}

// lastInSlot is the index of the last of posted messages that used slot
// j of depth slots (-1 when none did).
func lastInSlot(posted, j, depth int) int {
	if posted <= j {
		return -1
	}
	return j + (posted-1-j)/depth*depth
}
