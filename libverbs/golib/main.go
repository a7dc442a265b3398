// Command golib is the Go half of metaroce's libibverbs.so.1, built with
// -buildmode=c-shared into build/verbs/libmetaroce-verbs.so (make verbs).
// The C library (libverbs/src) loads it with dlopen at the first
// ibv_open_device, so a program that only lists devices never starts a Go
// runtime. The exported calls are the C ABI of cgo/mrg.h.
package main

/*
#include <errno.h>
#include <string.h>
#cgo CFLAGS: -I${SRCDIR}/../../cgo
#include "mrg.h"
*/
import "C"

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"unsafe"

	_ "github.com/metaroce/metaroce/cgo" // cgo/mrg.h: a change rebuilds this package
	"github.com/metaroce/metaroce/internal/profileload"
	"github.com/metaroce/metaroce/profile"
)

// ProfileEnv names the profile file; unset or empty: the embedded default.
const ProfileEnv = "METAROCE_PROFILE"

// endpoint is what the device stands for, from the profile.
type endpoint struct {
	ip        netip.Addr
	port      int
	mtu       int
	transport profile.Transport
	cfg       profile.Config
}

// loadEndpoint reads the profile and picks the device's address:
// verbs.ip, else udp.server_ip.
func loadEndpoint() (endpoint, error) {
	l, err := profileload.Load(os.Getenv(ProfileEnv))
	if err != nil {
		return endpoint{}, err
	}
	if err := l.ValidateError(); err != nil {
		return endpoint{}, err
	}
	c := l.Config
	if err := checkBackend(c); err != nil {
		return endpoint{}, err
	}
	ip := c.Verbs.IP
	if ip == "" {
		ip = c.UDP.ServerIP
	}
	if c.Backend == profile.BackendDPDK && len(c.DPDK.Ports) > 0 {
		// The device is the DPDK port: its own address (the /prefix
		// dropped) is the GID.
		port, _, _ := strings.Cut(c.DPDK.Ports[0].IP, "/")
		if c.Verbs.IP != "" && c.Verbs.IP != port {
			return endpoint{}, fmt.Errorf("metaroce verbs: %s: verbs.ip %s is not the DPDK port's address %s (dpdk.ports[0].ip)", l.Name, c.Verbs.IP, port)
		}
		ip = port
	}
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() {
		return endpoint{}, fmt.Errorf("metaroce verbs: %s: no IPv4 address for the device (set verbs.ip)", l.Name)
	}
	ep := endpoint{ip: a, port: c.Verbs.Port, mtu: c.MTU(), transport: c.Transport, cfg: c}
	return ep, nil
}

// What the last ibv_open_device read: the transport starts from it at the
// first call that needs it (getEng), so that opening the device to query
// it (ibv_devinfo) opens no socket.
var (
	openMu   sync.Mutex
	opened   endpoint
	openPush C.mrg_push_fn
)

// getEng returns the running transport, starting it on first use; the
// error has been printed on stderr (the C caller returns an errno). Once
// it runs, an atomic load: the posting calls come here once per
// ibv_post_send, and the mutex and sync.Once on the way to start were 4%
// of ib_write_bw's client at 4 KiB.
func getEng() *eng {
	if g := startedEng.Load(); g != nil {
		return g
	}
	openMu.Lock()
	e, push := opened, openPush
	openMu.Unlock()
	g, err := start(e, push)
	if err != nil {
		reportOnce.Do(func() { fmt.Fprintln(os.Stderr, err) })
		return nil
	}
	return g
}

var reportOnce sync.Once

// setErr copies msg into the C buffer err of errlen bytes, NUL-terminated.
func setErr(err *C.char, errlen C.int, msg string) {
	if err == nil || errlen <= 0 {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(err)), int(errlen))
	n := copy(b[:len(b)-1], msg)
	b[n] = 0
}

// MetaroceVerbsOpen reads the profile, starts the transport (once per
// process) and fills ep (mrg.h).
//
//export MetaroceVerbsOpen
func MetaroceVerbsOpen(ep *C.struct_mrv_endpoint, push C.mrg_push_fn, err *C.char, errlen C.int) C.int {
	e, lerr := loadEndpoint()
	if lerr != nil {
		setErr(err, errlen, lerr.Error())
		return C.EINVAL
	}
	openMu.Lock()
	opened, openPush = e, push
	openMu.Unlock()
	if perr := prestart(e); perr != nil {
		setErr(err, errlen, perr.Error())
		return C.EINVAL
	}
	ip4 := e.ip.As4()
	ep.ipv4 = *(*C.uint32_t)(unsafe.Pointer(&ip4[0])) // network order as laid out
	ep.udp_port = C.uint16_t(e.port)
	ep.mtu = C.uint32_t(e.mtu)
	name := []byte(e.transport)
	t := unsafe.Slice((*byte)(unsafe.Pointer(&ep.transport[0])), len(ep.transport))
	clear(t)
	copy(t[:len(t)-1], name)
	return 0
}

func main() {}
