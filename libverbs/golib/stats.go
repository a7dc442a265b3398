package main

/*
#include <stdint.h>
*/
import "C"

// MetaroceVerbsRxInjectedDrops is how many arrivals the UDP backend's
// impairment stage (udp.loss) dropped in this process so far (the
// transport as getEng gives it: a process that opened no PD or CQ yet
// starts it here). It is not part of mrg.h's API (the C library never
// calls it) nor of libibverbs.so.1's ABI: tests of ours (ctest/integrity.c)
// look it up with dlopen(RTLD_NOLOAD) + dlsym to show that the loss they
// ran under was really injected.
//
//export MetaroceVerbsRxInjectedDrops
func MetaroceVerbsRxInjectedDrops() C.uint64_t {
	g := getEng()
	if g == nil {
		return 0
	}
	return C.uint64_t(g.be.Stats().RxInjectedDrops)
}
