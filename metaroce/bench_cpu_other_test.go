//go:build !unix

package metaroce_test

// cpuTime is not measured here: the benchmark reports no CPU time.
func cpuTime() int64 { return 0 }
