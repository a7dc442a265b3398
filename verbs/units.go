package verbs

import "time"

// Time is a monotonic timestamp in nanoseconds. Its origin is chosen by the
// caller (virtual time in the simulator, a monotonic clock in real backends);
// the cores only ever subtract and compare Times.
type Time int64

// Add returns t+d.
func (t Time) Add(d time.Duration) Time { return t + Time(d) }

// Sub returns t-u as a Duration.
func (t Time) Sub(u Time) time.Duration { return time.Duration(t - u) }

// Never is a deadline that never arrives.
const Never Time = 1<<63 - 1

// PathID indexes a path within a connection (0..NumPaths-1).
type PathID uint16

// PlaneID names a fabric plane (one NIC port per plane on each host).
type PlaneID uint8

// Entropy is the value a backend puts in the UDP source port of a path's
// packets, so that ECMP hashing routes each path separately.
type Entropy uint16

// PeerHandle is the backend's opaque name for a remote endpoint (an index
// into the backend's address table, a simulator host id). The cores only
// pass it back in TxMeta.
type PeerHandle uint32

// QPN is a queue pair number, unique among the live queue pairs of one
// device (ibv_qp.qp_num; 24 bits in RoCEv2's BTH). Completions carry the
// QPN of the queue pair they belong to.
type QPN uint32
