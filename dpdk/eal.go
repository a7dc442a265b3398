//go:build dpdk

package dpdk

/*
#include "mr_dpdk.h"
*/
import "C"

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"unsafe"
)

// EAL state. rte_eal_init may run only once per process, ever (even after
// rte_eal_cleanup), so tests that need several EAL configurations run
// each in a subprocess.
var (
	ealMu      sync.Mutex
	ealUp      bool
	ealTried   bool
	ealArgv    []*C.char // kept alive: EAL may keep pointers into argv
	ealNoHuge  bool
	ealCleaned bool
)

// ErrEALDone means rte_eal_init was already called in this process.
var ErrEALDone = errors.New("dpdk: EAL was already initialised in this process (rte_eal_init runs once per process)")

// Init starts the EAL with args, which are EAL arguments only (no program
// name, no "--"). It locks the calling goroutine to its OS thread for good:
// that thread becomes the main lcore, and work that must run on the main
// lcore has to stay on this goroutine. Call it from a goroutine that lives
// as long as the EAL (main): when a locked goroutine exits, Go ends its
// thread. It returns the number of arguments EAL consumed.
//
// EAL pins the main lcore's thread to that lcore's CPU set, and threads
// the Go runtime creates later may inherit the mask: with "-l 0" every
// shard could end up on CPU 0. Give the main lcore all CPUs the process
// may use, e.g. --lcores "0@(0-N),1@(0-N)", as the tests and profiles do.
func Init(args []string) (int, error) {
	ealMu.Lock()
	defer ealMu.Unlock()
	if ealTried {
		return 0, ErrEALDone
	}
	ealTried = true
	runtime.LockOSThread()
	argv := make([]*C.char, 0, len(args)+2)
	argv = append(argv, C.CString("metaroce"))
	for _, a := range args {
		argv = append(argv, C.CString(a))
		if a == "--no-huge" {
			ealNoHuge = true
		}
	}
	ealArgv = argv
	// C memory for argv itself: EAL reorders it.
	cargv := (**C.char)(C.malloc(C.size_t(len(argv)+1) * C.size_t(unsafe.Sizeof(uintptr(0)))))
	s := unsafe.Slice(cargv, len(argv)+1)
	copy(s, argv)
	s[len(argv)] = nil
	ret := C.rte_eal_init(C.int(len(argv)), cargv)
	if ret < 0 {
		runtime.UnlockOSThread()
		return 0, errno("rte_eal_init")
	}
	ealUp = true
	return int(ret) - 1, nil
}

// Initialized reports whether the EAL is running.
func Initialized() bool {
	ealMu.Lock()
	defer ealMu.Unlock()
	return ealUp
}

// NoHuge reports whether the EAL runs without hugepages (--no-huge): fine
// for tests, not for performance.
func NoHuge() bool {
	ealMu.Lock()
	defer ealMu.Unlock()
	return ealNoHuge
}

// Cleanup releases the EAL's resources (rte_eal_cleanup): hugepage files,
// runtime directory. Ports, pools and rings must be released first. The EAL
// cannot be started again in this process.
func Cleanup() error {
	ealMu.Lock()
	defer ealMu.Unlock()
	if !ealUp || ealCleaned {
		return nil
	}
	ealCleaned = true
	ealUp = false
	dir := C.GoString(C.rte_eal_get_runtime_dir())
	err := errRet("rte_eal_cleanup", C.rte_eal_cleanup())
	// DPDK 22.11 leaves its runtime directory (/var/run/dpdk/<file-prefix>)
	// behind; it belongs to this process's prefix, so remove it.
	if dir != "" && filepath.Base(filepath.Dir(dir)) == "dpdk" {
		if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// RegisterThread registers the calling OS thread with the EAL
// (rte_thread_register) so it gets an lcore id and per-lcore mempool
// caches. The caller must have locked its goroutine to the thread
// (runtime.LockOSThread) and must call UnregisterThread before unlocking.
func RegisterThread() error {
	if C.rte_thread_register() < 0 {
		return errno("rte_thread_register")
	}
	return nil
}

// UnregisterThread undoes RegisterThread on the calling thread.
func UnregisterThread() { C.rte_thread_unregister() }

// LcoreID is the calling thread's lcore id, or -1 when it has none.
func LcoreID() int {
	id := C.rte_lcore_id()
	if id == C.LCORE_ID_ANY {
		return -1
	}
	return int(id)
}

// LcoreCount is the number of lcores the EAL was started with.
func LcoreCount() int { return int(C.rte_lcore_count()) }

// SocketID is the NUMA socket of the calling thread (0 when unknown).
func SocketID() int {
	s := int(C.rte_socket_id())
	if s < 0 || s > 64 {
		return 0
	}
	return s
}
