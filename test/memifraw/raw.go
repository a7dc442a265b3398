//go:build dpdk

// Package memifraw is the raw memif baseline the DPDK transport is
// measured against: a sender that bursts fixed-size frames out of one port
// as fast as the queue takes them, and a receiver that takes them off the
// peer port and frees them, both doing the least a packet path can do
// (one cgo call per burst each way, no protocol). Its benchmark runs it and
// the metaroce write_bw over memif in the same process, at the same frame
// size, and reports their ratio. The same sender and receiver over an
// af_packet pair on a veth pair (afpacket_test.go) measure the ceiling of
// the af_packet cells.
package memifraw

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/metaroce/metaroce/dpdk"
)

// Result is what a raw run moved.
type Result struct {
	Frames  uint64
	Bytes   uint64 // frame bytes received
	Elapsed time.Duration
}

// Mpps is millions of frames per second.
func (r Result) Mpps() float64 { return float64(r.Frames) / r.Elapsed.Seconds() / 1e6 }

// Gbps is frame bits per second, in Gb/s.
func (r Result) Gbps() float64 { return float64(r.Bytes) * 8 / r.Elapsed.Seconds() / 1e9 }

// Run sends frames of frameLen bytes from tx (queue 0) to rx (queue 0)
// until the receiver has counted n of them, with the sender and the
// receiver each on its own goroutine locked to a registered OS thread.
// The pool supplies the sender's mbufs.
func Run(pool *dpdk.Pool, tx, rx dpdk.PortID, frameLen int, n uint64, burst int) (Result, error) {
	var hdr [42]byte // a constant header, as a packet generator writes
	for i := range hdr {
		hdr[i] = byte(i)
	}
	return RunHeader(pool, tx, rx, hdr[:], frameLen, n, burst)
}

// RunHeader is Run with each frame's first len(hdr) bytes set to hdr (a
// real Ethernet/IPv4/UDP header where the kernel sees the frames: over
// af_packet the peer's stack treats a frame to its own MAC as a packet
// to receive, one to another MAC as one to skip). hdr must not be longer
// than frameLen; it is read, not kept.
func RunHeader(pool *dpdk.Pool, tx, rx dpdk.PortID, hdr []byte, frameLen int, n uint64, burst int) (Result, error) {
	var got atomic.Uint64
	var stop atomic.Bool
	errc := make(chan error, 2)
	start := time.Now()
	go func() { // sender
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := dpdk.RegisterThread(); err != nil {
			errc <- err
			return
		}
		defer dpdk.UnregisterThread()
		ms := dpdk.NewMbufArray(burst) // C memory: no cgo pointer check per call
		defer dpdk.FreeMbufArray(ms)
		for !stop.Load() {
			if err := pool.AllocBulk(ms); err != nil {
				runtime.Gosched() // pool empty: the receiver frees soon
				continue
			}
			for _, m := range ms {
				copy(m.Room(), hdr)
				m.SetLen(frameLen)
			}
			tx.TxBurstFree(0, ms) // what the queue refuses is freed: a raw sender drops
		}
		errc <- nil
	}()
	var res Result
	go func() { // receiver
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := dpdk.RegisterThread(); err != nil {
			errc <- err
			return
		}
		defer dpdk.UnregisterThread()
		ms := dpdk.NewMbufArray(burst)
		defer dpdk.FreeMbufArray(ms)
		var frames, bytes uint64
		for frames < n && !stop.Load() {
			k := rx.RxBurst(0, ms)
			for _, m := range ms[:k] {
				bytes += uint64(m.Len())
			}
			frames += uint64(k)
			dpdk.FreeBulk(ms[:k])
		}
		res = Result{Frames: frames, Bytes: bytes, Elapsed: time.Since(start)}
		got.Store(frames)
		stop.Store(true)
		errc <- nil
	}()
	var first error
	for i := 0; i < 2; i++ {
		if err := <-errc; err != nil && first == nil {
			first = err
			stop.Store(true)
		}
	}
	// Drain what is still in flight so the pool is whole again.
	ms := make([]*dpdk.Mbuf, burst)
	for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); {
		k := rx.RxBurst(0, ms)
		dpdk.FreeBulk(ms[:k])
	}
	return res, first
}
