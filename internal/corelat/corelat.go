// Package corelat measures how long a cache line takes to travel from one
// CPU to another: two threads, pinned one to each CPU, pass a counter
// back and forth in one shared word, and the time per hop is the answer.
//
// On a shared virtual machine the answer changes while you watch: the
// hypervisor moves virtual CPUs between cores that share a cache and
// cores that do not. On the 2-vCPU development machine ten measurements a
// second apart gave 29 to 33 ns, then 168 to 172 ns for three seconds,
// then 29 ns again (2026-12-03). Everything that moves data between two
// processes on those CPUs (a memif pair's shared rings, the two ends of a
// benchmark) slows down with it, by 2 to 3 times in the memif cells, so
// the benchmark harnesses record it beside each run (scripts/dpdk-cells.sh,
// `metaroce corelat`).
package corelat

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// line is the shared word, alone in its cache line (and the next, which
// adjacent-line prefetchers pair with it).
type line struct {
	_ [128]byte
	v atomic.Int64
	_ [128]byte
}

// ErrTimeout is returned when a hop does not come back within the
// deadline (the peer's CPU is busy with something else, or not running
// the peer at all).
var ErrTimeout = errors.New("corelat: the peer thread did not answer in time")

// Measure passes a counter between CPU a and CPU b trips times there and
// back and returns the mean time of one hop (one way). The calling
// goroutine is pinned to a for the measurement and its thread's CPU mask
// is restored afterwards. It fails when a equals b (two spinning threads
// on one CPU only advance when the scheduler preempts one), when either
// CPU is not in the process's allowed set, or when the whole measurement
// takes longer than limit.
func Measure(a, b, trips int, limit time.Duration) (time.Duration, error) {
	if a == b {
		return 0, fmt.Errorf("corelat: cores %d and %d are the same", a, b)
	}
	if a < 0 || b < 0 || trips < 1 {
		return 0, fmt.Errorf("corelat: cores %d,%d and %d trips: want two CPUs and at least one trip", a, b, trips)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return 0, fmt.Errorf("corelat: %w", err)
	}
	defer func() { _ = unix.SchedSetaffinity(0, &old) }()
	if err := pin(a); err != nil {
		return 0, err
	}
	var l line
	var stop atomic.Bool
	peerErr := make(chan error, 1)
	go func() {
		// Locked and never unlocked: when the goroutine returns, Go ends
		// its thread, and the CPU mask set here goes with it instead of
		// pinning whatever goroutine the thread would run next.
		runtime.LockOSThread()
		if err := pin(b); err != nil {
			l.v.Store(-1)
			peerErr <- err
			return
		}
		l.v.Store(1) // ready
		for want := int64(2); want <= int64(2*trips); want += 2 {
			for l.v.Load() != want {
				if stop.Load() {
					peerErr <- nil
					return
				}
			}
			l.v.Store(want + 1)
		}
		peerErr <- nil
	}()
	deadline := time.Now().Add(limit)
	wait := func(want int64) error {
		for k := 0; l.v.Load() != want; k++ {
			if l.v.Load() == -1 {
				return <-peerErr
			}
			if k&0xFFF == 0 && time.Now().After(deadline) {
				return ErrTimeout
			}
		}
		return nil
	}
	if err := wait(1); err != nil {
		stop.Store(true)
		return 0, err
	}
	start := time.Now()
	var err error
	for i := int64(1); i <= int64(trips); i++ {
		l.v.Store(2 * i)
		if err = wait(2*i + 1); err != nil {
			break
		}
	}
	el := time.Since(start)
	stop.Store(true)
	if perr := <-peerErr; err == nil {
		err = perr
	}
	if err != nil {
		return 0, err
	}
	return el / time.Duration(2*trips), nil
}

// pin binds the calling thread to CPU c.
func pin(c int) error {
	var s unix.CPUSet
	s.Set(c)
	if err := unix.SchedSetaffinity(0, &s); err != nil {
		if errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("corelat: CPU %d is not one this process may run on (taskset, cgroup cpuset): %w", c, err)
		}
		return fmt.Errorf("corelat: pin to CPU %d: %w", c, err)
	}
	return nil
}
