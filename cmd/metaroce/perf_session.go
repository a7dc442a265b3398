package main

import (
	"errors"
	"fmt"
	"github.com/metaroce/metaroce/verbs"
	"net/netip"
	"time"

	"github.com/metaroce/metaroce/engine"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/profile"
)

const setupTimeout = 15 * time.Second

// opener opens one end's data path for transport t (server: which end).
// perf opens a UDP backend on its address, or takes the DPDK engine the
// process started; bench keeps two DPDK engines open across its points.
type opener func(t profile.Transport, server bool) (engine.Backend, error)

// udpOpener opens a UDP backend on ip, on the transport's port.
func udpOpener(cfg profile.Config, ip netip.Addr) opener {
	return func(t profile.Transport, _ bool) (engine.Backend, error) {
		return openBackend(cfg, t, ip, transportPort(cfg, t))
	}
}

// openSession builds this end's backend and node.
func openSession(cfg profile.Config, p perfParams, open opener, server bool) (*node, error) {
	be, err := open(p.Transport, server)
	if err != nil {
		return nil, err
	}
	id := mr.NodeID(1)
	if server {
		id = 2
	}
	slot := p.maxSize() * p.slots()
	n, err := newNode(cfg, p.Transport, be, server, id, slot*p.QPs, p.Paths, max(p.TxDepth, p.RxDepth)+16)
	if err != nil {
		be.Close()
		return nil, err
	}
	n.slot, n.stride = slot, p.maxSize()
	return n, nil
}

// runClient is the client side: hello, connect, every size, done.
// onPartial, when the run is interrupted, still gets what completed.
func runClient(cfg profile.Config, p perfParams, c ctrl, open opener, stop func() bool, prog *progress, capture func(*node)) ([]perfResult, *node, error) {
	n, err := openSession(cfg, p, open, false)
	if err != nil {
		return nil, nil, err
	}
	if capture != nil {
		capture(n)
	}
	info := n.mem.info()
	ks, err := newKeyShare(cfg)
	if err != nil {
		return nil, n, err
	}
	hello := ctrlMsg{Type: "hello", Params: &p, UDP: n.be.LocalAddr().String(), Mem: &info, Version: version}
	ks.clientKey(&hello)
	if err := c.send(hello); err != nil {
		return nil, n, err
	}
	w, err := waitMsg(c, nil, "welcome", setupTimeout, stop)
	if err != nil {
		return nil, n, err
	}
	if err := ks.clientFinish(n, w); err != nil {
		return nil, n, err
	}
	addr, err := netip.ParseAddrPort(w.UDP)
	if err != nil || w.Mem == nil {
		return nil, n, fmt.Errorf("setup: bad welcome %+v", w)
	}
	if n.peer, err = n.be.AddPeer(addr); err != nil {
		return nil, n, err
	}
	n.peerAddr = addr.String()
	if err := n.connect(false, p.QPs, time.Now().Add(setupTimeout), stop); err != nil {
		return nil, n, err
	}
	if _, err := waitMsg(c, n, "ready", setupTimeout, stop); err != nil {
		return nil, n, err
	}
	var results []perfResult
	var runErr error
	var last runner
	for _, size := range p.Sizes {
		r := newRunner(n, p, size, *w.Mem)
		last = r
		res, err := drive(n, r, stop, prog, p.Test)
		results = append(results, res)
		if err != nil {
			runErr = err
			break
		}
	}
	runErr = n.explain(runErr)
	rep := n.repair()
	done := ctrlMsg{Type: "done", Results: results, Repair: &rep}
	if r, ok := last.(*bwRunner); ok {
		done.Posted = r.posted
	}
	if err := c.send(done); err != nil && runErr == nil {
		runErr = err
	}
	// The server answers with its own results (bidirectional runs), its
	// loss repair and its verification. After a failed run it may be gone:
	// then its column is left out.
	wait := 10 * time.Second
	if p.Bidir {
		wait = 10 * time.Minute
	}
	if runErr != nil {
		wait = 2 * time.Second
	}
	m, err := waitMsg(c, n, "done", wait, stop)
	if err != nil {
		if runErr == nil {
			runErr = err
		}
		return results, n, runErr
	}
	n.peerRepair = m.Repair
	if m.VerifyErr != "" && runErr == nil {
		runErr = errors.New("server: " + m.VerifyErr)
	}
	if p.Bidir && runErr == nil {
		for i := range results {
			if i < len(m.Results) {
				results[i] = results[i].plus(m.Results[i])
			}
		}
	}
	return results, n, runErr
}

func newRunner(n *node, p perfParams, size int, remote regionInfo) runner {
	if p.isLat() {
		return newLatRunner(n, p.Test, size, p.Iters, p.Duration, remote)
	}
	return newBWRunner(n, p.Test, size, p.Iters, p.Duration, p.TxDepth, remote, n.slot, p.Verify)
}

// stopGrace is how long a stopped run (SIGINT, SIGTERM) waits for the
// completions of what it had posted: they may never come (a peer that
// froze, a path an attacker stalled), and a stopped program must exit.
var stopGrace = 2 * time.Second

// drive runs r to the end on n. stop (SIGINT) stops posting; what has
// completed is the partial result. After stop it waits at most stopGrace
// for outstanding completions.
func drive(n *node, r runner, stop func() bool, prog *progress, test string) (perfResult, error) {
	interrupted := false
	var giveUp time.Time
	err := n.run(func(verbs.Time) (bool, error) {
		if r.finished() {
			return true, nil
		}
		if !interrupted && stop != nil && stop() {
			r.stop()
			interrupted = true
			giveUp = time.Now().Add(stopGrace)
		}
		if interrupted && time.Now().After(giveUp) {
			return true, nil
		}
		if err := driveStep(r, n.poll()); err != nil {
			return false, err
		}
		if prog != nil {
			prog.tick(test, r)
		}
		return false, nil
	})
	if err != nil {
		return r.result(), err
	}
	res := r.result()
	res.Partial = interrupted
	if interrupted {
		return res, errInterrupted
	}
	return res, nil
}

// driveStep is the runner's share of one step of the node's loop: this
// step's completions wcs first, then posts, then the runner's failure, if
// any. The order matters: a post that waited for this step's completions
// goes out in this iteration's send, not after the backend's idle wait
// (the udp backend sleeps up to 1 ms when a step sent and received
// nothing; posting first capped send_bw -t 4 at about 4 K messages/s).
func driveStep(r runner, wcs []verbs.WorkCompletion) error {
	for _, wc := range wcs {
		r.onWC(wc)
	}
	r.pump()
	return r.failure()
}

// serve is the server side after the hello: welcome, accept, post
// receives, ready, then echo (latency tests), repost receives (SEND
// tests) and, when bidirectional, run the same test towards the client,
// until the client's done.
func serve(cfg profile.Config, c ctrl, hello ctrlMsg, open opener, stop func() bool, capture func(*node)) ([]perfResult, *node, error) {
	p := *hello.Params
	peerAddr, err := netip.ParseAddrPort(hello.UDP)
	if err != nil || hello.Mem == nil {
		return nil, nil, fmt.Errorf("setup: bad hello")
	}
	n, err := openSession(cfg, p, open, true)
	if err != nil {
		_ = c.send(ctrlMsg{Type: "error", Err: err.Error()})
		return nil, nil, err
	}
	if capture != nil {
		capture(n)
	}
	if n.peer, err = n.be.AddPeer(peerAddr); err != nil {
		return nil, n, err
	}
	info := n.mem.info()
	welcome := ctrlMsg{Type: "welcome", UDP: n.be.LocalAddr().String(), Mem: &info}
	if err := serverKey(cfg, n, hello, &welcome); err != nil {
		return nil, n, err
	}
	if err := c.send(welcome); err != nil {
		return nil, n, err
	}
	if err := n.connect(true, p.QPs, time.Now().Add(setupTimeout), stop); err != nil {
		return nil, n, err
	}
	remote := *hello.Mem
	usesRecv := p.Test == "send_bw" || p.Test == "send_lat" || p.Test == "write_lat"
	// recvSGE is where receive j of QP q lands: the QP's slot, or with
	// --verify its own sub-slot (receive WR id q<<32 | j).
	recvSGE := func(q, j int) verbs.SGE {
		if p.Verify {
			return n.mem.sge(q*n.slot+j*n.stride, n.stride)
		}
		return n.mem.sge(q*n.slot, n.slot)
	}
	if usesRecv || (p.Bidir && p.Test == "send_bw") {
		depth := p.RxDepth
		if p.isLat() {
			depth = 4
		}
		for q, qp := range n.qps {
			for i := 0; i < depth; i++ {
				j := 0
				if p.Verify {
					j = i
				}
				if err := qp.PostRecv(n.be.Now(), verbs.RecvWR{ID: uint64(q)<<32 | uint64(j), Local: recvSGE(q, j)}); err != nil {
					return nil, n, err
				}
			}
		}
	}
	if p.Verify && p.Test == "read_bw" {
		// The READ source: slot j of QP q holds pattern j.
		for q := range n.qps {
			for j := 0; j < p.TxDepth; j++ {
				off := q*n.slot + j*n.stride
				fillPattern(n.mem.buf[off:off+n.stride], q, j)
			}
		}
	}
	var verr error              // the first verification failure
	recvd := make([]int, p.QPs) // receives completed per QP (--verify)
	if err := c.send(ctrlMsg{Type: "ready"}); err != nil {
		return nil, n, err
	}
	var (
		mine    []perfResult
		runners []runner
		cur     runner
		client  *ctrlMsg
	)
	if p.Bidir && !p.isLat() {
		for _, s := range p.Sizes {
			runners = append(runners, newRunner(n, p, s, remote))
		}
	}
	var res []perfResult
	err = n.run(func(now verbs.Time) (bool, error) {
		if stop != nil && stop() {
			return false, errInterrupted
		}
		if m, ok := c.recv(); ok {
			switch m.Type {
			case "done":
				client = &m
				n.peerRepair = m.Repair
				if p.Verify && p.Test == "write_bw" && verr == nil {
					verr = checkWrites(n, p, m.Posted)
				}
			case "error":
				return false, fmt.Errorf("peer: %s", m.Err)
			}
		} else if err := c.gone(); err != nil && client == nil {
			return false, err
		}
		if cur == nil && len(runners) > 0 {
			cur, runners = runners[0], runners[1:]
		}
		if cur != nil {
			cur.pump()
		}
		for _, wc := range n.poll() {
			q := int(wc.WRID >> 32)
			switch wc.Opcode {
			case verbs.WCRecv, verbs.WCRecvWriteImm:
				if wc.Status != verbs.StatusSuccess {
					return false, fmt.Errorf("receive failed: %v", wc.Status)
				}
				if q >= len(n.qps) {
					q = 0
				}
				j := int(uint32(wc.WRID))
				if p.Verify && verr == nil {
					off := q*n.slot + j*n.stride
					verr = checkPattern(n.mem.buf[off:off+int(wc.ByteLen)], q, recvd[q], recvd[q])
					recvd[q]++
				}
				qp := n.qps[q]
				if err := qp.PostRecv(now, verbs.RecvWR{ID: uint64(q)<<32 | uint64(j), Local: recvSGE(q, j)}); err != nil {
					return false, err
				}
				var err error
				switch p.Test {
				case "send_lat":
					err = qp.PostSend(now, verbs.SendWR{ID: 1<<63 | 1, Opcode: verbs.WRSend, Local: n.mem.sge(0, int(wc.ByteLen))})
				case "write_lat":
					err = qp.PostSend(now, verbs.SendWR{ID: 1<<63 | 1, Opcode: verbs.WRWriteImm, Local: n.mem.sge(0, int(wc.Imm)),
						RemoteAddr: remote.Addr, RKey: verbs.RKey(remote.RKey), Imm: wc.Imm})
				}
				if err != nil {
					return false, err
				}
			default:
				if wc.WRID>>63 == 1 {
					if wc.Status != verbs.StatusSuccess {
						return false, fmt.Errorf("echo failed: %v", wc.Status)
					}
					continue
				}
				if cur != nil {
					cur.onWC(wc)
				}
			}
		}
		if cur != nil {
			if err := cur.failure(); err != nil {
				return false, err
			}
			if cur.finished() {
				mine = append(mine, cur.result())
				cur = nil
			}
		}
		if client != nil && cur == nil && len(runners) == 0 {
			rep := n.repair()
			done := ctrlMsg{Type: "done", Results: mine, Repair: &rep}
			if verr != nil {
				done.VerifyErr = verr.Error()
			}
			if err := c.send(done); err != nil {
				return false, err
			}
			if verr != nil {
				return false, verr
			}
			res = client.Results
			for i := range res {
				if i < len(mine) {
					res[i] = res[i].plus(mine[i])
				}
			}
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return mine, n, n.explain(err)
	}
	return res, n, nil
}

// checkWrites checks, once the client is done, what its WRITEs left in
// this end's buffer: for each QP and target slot, the pattern of the last
// message the client posted to it (posted[q] messages in all).
func checkWrites(n *node, p perfParams, posted []int) error {
	if len(posted) != len(n.qps) {
		return fmt.Errorf("verify: the client reported %d QPs' counts, want %d", len(posted), len(n.qps))
	}
	size := p.Sizes[0]
	for q := range n.qps {
		for j := 0; j < p.TxDepth; j++ {
			i := lastInSlot(posted[q], j, p.TxDepth)
			if i < 0 {
				break
			}
			off := q*n.slot + j*n.stride
			if err := checkPattern(n.mem.buf[off:off+size], q, i, i); err != nil {
				return err
			}
		}
	}
	return nil
}
