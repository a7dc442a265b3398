package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/metaroce/metaroce/engine/pcap"
	"github.com/metaroce/metaroce/sim"
)

// pcapSink writes the frames of `metaroce sim --pcap`: engine/pcap writes
// the file header and builds each Ethernet/IPv4/UDP frame (ECN bits from
// the simulated IP header, valid IPv4 checksum, MACs derived from the IP
// addresses); this sink writes the record headers itself so that it can
// keep only the first snaplen bytes of each frame (a record with
// incl_len < orig_len, as tcpdump -s writes), which keeps captures of
// 4 KiB-MTU traffic to a sensible size.
type pcapSink struct {
	f       *os.File
	w       *bufio.Writer
	snaplen int
	max     int
	count   int
	frame   func(t int64, fr sim.Frame)
	buf     []byte
	err     error
}

func newPcapSink(path string, snaplen, max int) (*pcapSink, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	p := &pcapSink{f: f, w: bufio.NewWriterSize(f, 1<<20), snaplen: snaplen, max: max}
	p.frame = p.write
	if _, err := pcap.NewWriter(p.w); err != nil {
		f.Close()
		return nil, err
	}
	return p, nil
}

func ipv4(v uint32) [4]byte { return [4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

func (p *pcapSink) write(t int64, fr sim.Frame) {
	if p.count >= p.max || p.err != nil {
		return
	}
	p.count++
	f := pcap.Frame{SrcIP: ipv4(fr.SrcIP), DstIP: ipv4(fr.DstIP), SrcPort: fr.SrcPort, DstPort: fr.DstPort}
	f.SrcMAC, f.DstMAC = pcap.MACFromIPv4(f.SrcIP), pcap.MACFromIPv4(f.DstIP)
	switch {
	case fr.CE:
		f.ECN = 3
	case fr.ECT:
		f.ECN = 2 // ECT(0)
	}
	var rec [16]byte
	p.buf = pcap.AppendFrame(p.buf[:0], f, fr.Payload)
	incl := min(len(p.buf), p.snaplen)
	binary.LittleEndian.PutUint32(rec[0:], uint32(t/1e9))
	binary.LittleEndian.PutUint32(rec[4:], uint32(t%1e9))
	binary.LittleEndian.PutUint32(rec[8:], uint32(incl))
	binary.LittleEndian.PutUint32(rec[12:], uint32(len(p.buf)))
	p.w.Write(rec[:])
	if _, err := p.w.Write(p.buf[:incl]); err != nil {
		p.err = err
	}
}

func (p *pcapSink) close() error {
	err := p.w.Flush()
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	if p.err != nil {
		return fmt.Errorf("pcap: %w", p.err)
	}
	return err
}
