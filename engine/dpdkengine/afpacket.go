//go:build dpdk

package dpdkengine

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// ringDrops counts what the kernel dropped because an af_packet port's
// receive ring was full. DPDK 22.11's af_packet PMD reports none of it
// (imissed stays 0; issue 13 saw up to 6% of frames lost there while
// every counter said 0), so the engine reads the PMD's own packet sockets
// with getsockopt(PACKET_STATISTICS). That read resets the kernel's
// counters: the engine accumulates them, and nothing else may read them.
type ringDrops struct {
	mu      sync.Mutex
	fds     []int // the PMD's packet sockets bound to our ports' interfaces
	drops   uint64
	packets uint64 // frames the kernel handed to the rings (tp_packets)
	err     error  // first read error, kept
}

// ifIndexes lists the kernel interfaces of the engine's af_packet ports.
func (e *Engine) ifIndexes() []int {
	var out []int
	for _, p := range e.ports {
		if p.ifIndex > 0 {
			out = append(out, p.ifIndex)
		}
	}
	return out
}

// find locates this process's packet sockets bound to ifindexes: each
// socket's inode in /proc/net/packet (which gives its interface) matched
// against the process's descriptors. No interface: nothing to find.
func (r *ringDrops) find(ifindexes []int, what string) error {
	if len(ifindexes) == 0 {
		return nil
	}
	inodes, err := packetSockets(ifindexes)
	if err != nil {
		return err
	}
	dir := "/proc/self/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil || !strings.HasPrefix(l, "socket:[") {
			continue
		}
		ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]"), 10, 64)
		if err != nil || !inodes[ino] {
			continue
		}
		fd, err := strconv.Atoi(e.Name())
		if err == nil {
			r.fds = append(r.fds, fd)
		}
	}
	if len(r.fds) == 0 {
		return fmt.Errorf("no %s socket of interfaces %v among this process's descriptors", what, ifindexes)
	}
	// Counting starts when the PMD bound its sockets, not now: a frame
	// that reached a ring before this first read (an ARP while the ports
	// came up) is still in the ring and the engine will receive it, so
	// zeroing here would let RxFrames exceed Packets (CI saw 36988 >
	// 36987). The engine is each ring's only reader.
	return nil
}

// packetSockets returns the inodes of the packet sockets bound to one of
// ifindexes, from /proc/net/packet ("sk RefCnt Type Proto Iface R Rmem
// User Inode").
func packetSockets(ifindexes []int) (map[uint64]bool, error) {
	f, err := os.Open("/proc/net/packet")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want := map[int]bool{}
	for _, i := range ifindexes {
		want[i] = true
	}
	out := map[uint64]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 9 || fs[0] == "sk" {
			continue
		}
		ifi, err1 := strconv.Atoi(fs[4])
		ino, err2 := strconv.ParseUint(fs[8], 10, 64)
		if err1 == nil && err2 == nil && want[ifi] {
			out[ino] = true
		}
	}
	return out, sc.Err()
}

// readLocked adds what the kernel counted since the last read.
func (r *ringDrops) readLocked() {
	for _, fd := range r.fds {
		st, err := unix.GetsockoptTpacketStats(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
		if err != nil {
			if r.err == nil {
				r.err = fmt.Errorf("getsockopt(fd %d, PACKET_STATISTICS): %w", fd, err)
			}
			continue
		}
		r.drops += uint64(st.Drops)
		r.packets += uint64(st.Packets)
	}
}

// read returns the drops and ring arrivals so far.
func (r *ringDrops) read() (drops, packets uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.readLocked()
	return r.drops, r.packets
}

// RingStats is what the kernel counted on the engine's af_packet receive
// rings since Start: frames it put into them and frames it dropped because
// a ring was full. Both stay 0 without af_packet ports. Safe from any
// goroutine; each call is one getsockopt per ring.
type RingStats struct {
	Packets, Drops uint64
	// Sockets is how many of the PMD's packet sockets are read: 0 with
	// af_packet ports means drops cannot be counted (Start warned why).
	Sockets int
}

// RingStats reads the af_packet rings' counters.
func (e *Engine) RingStats() (RingStats, error) {
	d, p := e.ring.read()
	e.ring.mu.Lock()
	n, err := len(e.ring.fds), e.ring.err
	e.ring.mu.Unlock()
	return RingStats{Packets: p, Drops: d, Sockets: n}, err
}
