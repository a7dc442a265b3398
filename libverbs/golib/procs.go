package main

import (
	"os"
	"runtime"
)

// minProcs is the fewest Ps the library's Go runtime runs with on a
// process that may use two CPUs or more (see procsFor).
const minProcs = 8

// The runtime starts when the C library loads this one (the first
// ibv_open_device), and init runs before any of the transport's threads.
func init() { raiseProcs() }

// raiseProcs sets GOMAXPROCS to procsFor's answer and returns it.
func raiseProcs() int {
	_, set := os.LookupEnv("GOMAXPROCS")
	cur := runtime.GOMAXPROCS(0)
	n := procsFor(cur, runtime.NumCPU(), set)
	if n != cur {
		runtime.GOMAXPROCS(n)
	}
	return n
}

// procsFor is the GOMAXPROCS the library runs with, given the runtime's
// current one, the CPUs the process may use (its affinity mask) and
// whether the user set GOMAXPROCS in the environment: the user's value,
// or on one CPU the runtime's (1), else at least minProcs.
//
// Why more Ps than CPUs: the threads that run the transport hold a P
// while they are outside Go. The program's polling thread enters Go at
// every empty poll and post and runs C in between, its P in the syscall
// state; the loop waits in ppoll, its P the same. With GOMAXPROCS at its
// default (2 on a two-core host) no P is idle, and then sysmon retakes a P
// that has been in a syscall for one tick (20 us) and hands it to a thread
// that wakes to look for work; the next crossing into Go finds its P gone
// and waits for one (exitsyscall's slow path), and each retake keeps
// sysmon at its 20 us period. On a two-core VM, where a thread wake-up
// costs tens of microseconds, that was half of ib_send_lat's voluntary
// context switches, and its median latency (64 B, 5,000 round trips, four
// runs each) was 50-57 us with 2 Ps, 30-46 with 3, 29-39 with 4 and 24-38
// with 8. With an idle P, sysmon leaves a P in a syscall with an empty run
// queue alone for 10 ms (runtime.retake), and a thread back from C takes
// an idle P at once. The library runs a handful of goroutines, so Ps
// beyond the CPUs only bound how many may run Go code at once.
//
// Why not on one CPU (taskset -c 0): there the extra Ps let the loop's
// thread and the runtime's run Go beside the spinning poller on the only
// CPU, and ib_send_lat pinned took 30-55 us with 2, 3 or 8 Ps against
// 13-14 with the default 1.
func procsFor(cur, cpus int, envSet bool) int {
	if envSet || cpus < 2 || cur >= minProcs {
		return cur
	}
	return minProcs
}
