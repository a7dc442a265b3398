//go:build dpdk

// Package lcore launches the C loops (cgo/mr_lcore.h) that own a port's
// rx/tx queue on an EAL worker lcore and move mbuf bursts through
// rte_rings to and from Go engine shards. The loop steers on the UDP
// destination port (shard i listens on base+i), which spraying never
// changes, so a connection stays on one shard while its source port
// varies; it backs off when idle.
package lcore

/*
#cgo pkg-config: libdpdk
#cgo CFLAGS: -I${SRCDIR}/../cgo -O2 -Wno-deprecated-declarations
#include "mr_lcore.h"

static int mr_launch(struct mr_lcore_conf *c, unsigned lcore)
{
	return rte_eal_remote_launch(mr_lcore_loop, c, lcore);
}
*/
import "C"

import (
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	_ "github.com/metaroce/metaroce/cgo" // the headers: a change rebuilds this package
	"github.com/metaroce/metaroce/dpdk"
)

// MaxShards is the most shards one loop feeds.
const MaxShards = C.MR_MAX_SHARDS

// Config is one loop.
type Config struct {
	Lcore      int         // EAL worker lcore id to run on (not the main lcore)
	Port       dpdk.PortID // the port whose queues the loop owns
	RxQueue    uint16
	TxQueue    uint16
	Shards     int    // 1..MaxShards
	BasePort   uint16 // UDP destination port of shard 0; shard i: BasePort+i
	RingSize   int    // per ring, power of two; default 4096
	Burst      int    // default 32, at most 64
	IdleSpins  int    // default 10000
	MaxSleepUs int    // default 100
}

// Loop is a running lcore loop. Its conf lives in C memory: the C loop
// keeps a pointer to it, which Go memory must never be.
type Loop struct {
	conf    *C.struct_mr_lcore_conf
	lcore   int
	rx, tx  []*dpdk.Ring
	stopped bool
}

var loopSeq atomic.Uint64

// Launch creates the rings and starts the loop on its lcore.
func Launch(c Config) (*Loop, error) {
	if c.Shards < 1 || c.Shards > MaxShards {
		return nil, fmt.Errorf("lcore: %d shards outside 1..%d", c.Shards, MaxShards)
	}
	if c.RingSize == 0 {
		c.RingSize = 4096
	}
	if c.Burst == 0 {
		c.Burst = 32
	}
	if c.Burst > C.MR_LCORE_BURST {
		return nil, fmt.Errorf("lcore: burst %d above %d", c.Burst, C.MR_LCORE_BURST)
	}
	if c.IdleSpins == 0 {
		c.IdleSpins = 10000
	}
	if c.MaxSleepUs == 0 {
		c.MaxSleepUs = 100
	}
	if c.Lcore < 0 || c.Lcore >= C.RTE_MAX_LCORE || C.rte_lcore_is_enabled(C.uint(c.Lcore)) == 0 {
		return nil, fmt.Errorf("lcore: lcore %d is not enabled (EAL -l / --lcores)", c.Lcore)
	}
	if c.Lcore == int(C.rte_get_main_lcore()) {
		return nil, fmt.Errorf("lcore: lcore %d is the main lcore; loops need a worker", c.Lcore)
	}
	l := &Loop{lcore: c.Lcore}
	seq := loopSeq.Add(1)
	for i := 0; i < c.Shards; i++ {
		rx, err := dpdk.NewRing(fmt.Sprintf("mr_rx_%d_%d", seq, i), c.RingSize)
		if err != nil {
			l.freeRings()
			return nil, err
		}
		l.rx = append(l.rx, rx)
		tx, err := dpdk.NewRing(fmt.Sprintf("mr_tx_%d_%d", seq, i), c.RingSize)
		if err != nil {
			l.freeRings()
			return nil, err
		}
		l.tx = append(l.tx, tx)
	}
	conf := (*C.struct_mr_lcore_conf)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_mr_lcore_conf{}))))
	conf.port, conf.rxq, conf.txq = C.uint16_t(c.Port), C.uint16_t(c.RxQueue), C.uint16_t(c.TxQueue)
	conf.nshards, conf.base_port = C.uint16_t(c.Shards), C.uint16_t(c.BasePort)
	conf.burst, conf.idle_spins, conf.max_sleep_us = C.uint32_t(c.Burst), C.uint32_t(c.IdleSpins), C.uint32_t(c.MaxSleepUs)
	for i := range l.rx {
		conf.rx[i] = (*C.struct_rte_ring)(l.rx[i].Ptr())
		conf.tx[i] = (*C.struct_rte_ring)(l.tx[i].Ptr())
	}
	l.conf = conf
	if ret := C.mr_launch(conf, C.uint(c.Lcore)); ret != 0 {
		C.free(unsafe.Pointer(conf))
		l.freeRings()
		return nil, fmt.Errorf("lcore: launch on lcore %d: errno %d", c.Lcore, -ret)
	}
	return l, nil
}

// RxRing is the ring shard i receives from (the loop produces).
func (l *Loop) RxRing(i int) *dpdk.Ring { return l.rx[i] }

// TxRing is the ring shard i sends into (the loop consumes).
func (l *Loop) TxRing(i int) *dpdk.Ring { return l.tx[i] }

// Stats are a loop's counters.
type Stats struct {
	Loops, RxPackets, TxPackets, TxDropped uint64
	RxRingFull                             uint64 // frames dropped because a shard's ring was full
	NotSteered                             uint64 // frames that were not ours by UDP port (sent to shard 0)
	IdleSleeps                             uint64
	PerShard                               []uint64
}

// Stats reads the counters (live values are approximate: the loop writes
// them without locks).
func (l *Loop) Stats() Stats {
	c := l.conf
	s := Stats{Loops: uint64(c.loops), RxPackets: uint64(c.rx_pkts), TxPackets: uint64(c.tx_pkts), TxDropped: uint64(c.tx_dropped),
		RxRingFull: uint64(c.rx_ring_full), NotSteered: uint64(c.to_default), IdleSleeps: uint64(c.idle_sleeps)}
	for i := 0; i < int(c.nshards); i++ {
		s.PerShard = append(s.PerShard, uint64(c.per_shard[i]))
	}
	return s
}

// Stop ends the loop, waits for its lcore, and frees every mbuf left in
// the rings and the rings themselves. The shards must have stopped using
// the rings first. Stats stay readable afterwards.
func (l *Loop) Stop() error {
	if l.stopped {
		return nil
	}
	l.stopped = true
	*(*uint32)(unsafe.Pointer(&l.conf.stop)) = 1
	deadline := time.Now().Add(5 * time.Second)
	for C.rte_eal_get_lcore_state(C.uint(l.lcore)) == C.RUNNING {
		if time.Now().After(deadline) {
			return fmt.Errorf("lcore: loop on lcore %d did not stop", l.lcore)
		}
		time.Sleep(100 * time.Microsecond)
	}
	C.rte_eal_wait_lcore(C.uint(l.lcore))
	l.freeRings()
	return nil
}

func (l *Loop) freeRings() {
	buf := dpdk.NewMbufArray(64)
	defer dpdk.FreeMbufArray(buf)
	for _, rs := range [][]*dpdk.Ring{l.rx, l.tx} {
		for _, r := range rs {
			for n := r.Dequeue(buf); n > 0; n = r.Dequeue(buf) {
				dpdk.FreeBulk(buf[:n])
			}
			r.Free()
		}
	}
	l.rx, l.tx = nil, nil
}
