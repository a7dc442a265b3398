package main

import (
	"bufio"
	"fmt"
	"os"
	"sync"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/engine/pcap"
)

// pcapCapture opens file for --pcap and returns the hook that makes a
// node record into it (what the node sends and receives, after the
// impairment stage, with the real addresses, ports and ECN field), and the
// function that finishes the file. With file "" both do nothing. At most
// limit packets are recorded; the rest are counted and reported on close.
// Several nodes (bench) may record into one file: writes are serialized.
func pcapCapture(file string, limit int) (func(*node), func() error, error) {
	if file == "" {
		return nil, func() error { return nil }, nil
	}
	f, err := os.Create(file)
	if err != nil {
		return nil, nil, fmt.Errorf("--pcap: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	w, err := pcap.NewWriter(bw)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	var mu sync.Mutex
	var n, skipped int
	var werr error
	rec := func(ts int64, p engine.Packet) {
		mu.Lock()
		defer mu.Unlock()
		if n >= limit {
			skipped++
			return
		}
		n++
		fr := pcap.Frame{SrcIP: p.SrcIP, DstIP: p.DstIP, SrcPort: p.SrcPort, DstPort: p.DstPort, DSCP: p.DSCP, ECN: p.ECN,
			SrcMAC: macOf(p.SrcIP), DstMAC: macOf(p.DstIP)}
		if err := w.WriteUDP(ts, fr, p.Payload); err != nil && werr == nil {
			werr = err
		}
	}
	hook := func(nd *node) {
		if err := nd.be.SetCapture(rec); err != nil {
			// The backend cannot capture: the file's close reports it.
			mu.Lock()
			if werr == nil {
				werr = err
			}
			mu.Unlock()
		}
	}
	done := func() error {
		mu.Lock()
		defer mu.Unlock()
		err := werr
		if ferr := bw.Flush(); err == nil {
			err = ferr
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if skipped > 0 {
			fmt.Fprintf(os.Stderr, "metaroce: --pcap %s: recorded the first %d packets, %d more not recorded (--pcap-max)\n", file, n, skipped)
		}
		if err != nil {
			return fmt.Errorf("--pcap %s: %w", file, err)
		}
		return nil
	}
	return hook, done, nil
}

// macOf is a locally administered MAC address made from an IPv4 address
// (a loopback capture has no link layer; the file format wants one).
func macOf(ip [4]byte) [6]byte { return [6]byte{0x02, 0x00, ip[0], ip[1], ip[2], ip[3]} }
