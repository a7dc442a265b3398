//go:build unix

package metaroce_test

import "syscall"

// cpuTime is the CPU time the process has used, in ns (user and system).
// The benchmark reports it per packet beside ns/op: on a shared machine
// the wall clock also counts the time other processes had the CPU.
func cpuTime() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
