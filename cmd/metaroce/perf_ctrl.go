package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/metaroce/metaroce/profile"
	"github.com/metaroce/metaroce/verbs"
)

// The setup exchange, perftest-style: the client connects over TCP
// (perf.tcp_port, 18515 by default) and the two ends trade, as JSON lines,
// what perftest trades in its ctx_hand_shake: the test parameters, each
// end's data-path address (perftest: LID/QPN/PSN/GID) and its buffer's
// address and rkey. The same messages go over Go channels when `bench`
// runs both ends in one process.

// perfParams is what the client asks for; the server checks it matches
// its own test.
type perfParams struct {
	Test      string            `json:"test"`
	Transport profile.Transport `json:"transport"`
	Sizes     []int             `json:"sizes"`
	Iters     int               `json:"iters"`
	Duration  time.Duration     `json:"duration"`
	QPs       int               `json:"qps"`
	Bidir     bool              `json:"bidir"`
	TxDepth   int               `json:"tx_depth"`
	RxDepth   int               `json:"rx_depth"`
	Paths     int               `json:"paths"`
	Verify    bool              `json:"verify,omitempty"` // --verify (perf_verify.go)
}

// validate checks a client's parameters before the server acts on them
// (they come from the network).
func (p perfParams) validate() error {
	switch {
	case !slices.Contains(perfTests, p.Test):
		return fmt.Errorf("unknown test %q", p.Test)
	case transportKinds[p.Transport].NewDevice == nil:
		return fmt.Errorf("unknown transport %q", p.Transport)
	case len(p.Sizes) < 1 || len(p.Sizes) > 23:
		return fmt.Errorf("%d sizes, want 1..23", len(p.Sizes))
	case p.QPs < 1 || p.QPs > 64:
		return fmt.Errorf("%d QPs, want 1..64", p.QPs)
	case p.Iters < 0 || p.Iters > 100000000 || p.Duration < 0 || p.Duration > 24*time.Hour:
		return fmt.Errorf("iterations %d, duration %v out of range", p.Iters, p.Duration)
	case p.TxDepth < 1 || p.TxDepth > 15000 || p.RxDepth < 1 || p.RxDepth > 16384:
		return fmt.Errorf("depths %d/%d out of range", p.TxDepth, p.RxDepth)
	case p.Paths < 0 || p.Paths > 256:
		return fmt.Errorf("%d paths, want 0..256", p.Paths)
	}
	for _, s := range p.Sizes {
		if s < 1 || s > 1<<23 {
			return fmt.Errorf("size %d, want 1..8388608", s)
		}
	}
	if p.maxSize()*p.QPs*p.slots() > 256<<20 {
		return fmt.Errorf("%d QPs of %d slots of %d bytes need more than 256 MiB", p.QPs, p.slots(), p.maxSize())
	}
	if p.Verify && (p.isLat() || p.Bidir || len(p.Sizes) != 1) {
		return errors.New("--verify checks one size of a BW test in one direction (no -a, no -b, no latency test)")
	}
	return nil
}

// slots is the number of message slots of each QP's buffer: one, or with
// --verify one per outstanding message (TX or RX depth, the larger).
func (p perfParams) slots() int {
	if p.Verify {
		return max(p.TxDepth, p.RxDepth)
	}
	return 1
}

func (p perfParams) maxSize() int {
	m := 0
	for _, s := range p.Sizes {
		m = max(m, s)
	}
	return m
}

func (p perfParams) isLat() bool { return len(p.Test) > 4 && p.Test[len(p.Test)-4:] == "_lat" }

type ctrlMsg struct {
	Type    string       `json:"type"` // hello, welcome, ready, done, error
	Params  *perfParams  `json:"params,omitempty"`
	UDP     string       `json:"udp,omitempty"`
	Mem     *regionInfo  `json:"mem,omitempty"`
	Results []perfResult `json:"results,omitempty"`
	// done: the sender's loss repair (both ends), messages posted per QP
	// (client, for --verify of WRITE) and the first verification failure
	// (server).
	Repair    *repairStats `json:"repair,omitempty"`
	Posted    []int        `json:"posted,omitempty"`
	VerifyErr string       `json:"verify_error,omitempty"`
	Err       string       `json:"error,omitempty"`
	Version   string       `json:"version,omitempty"`
	// Key and Proof: the X25519 exchange of security.mode auth and
	// encrypt (perf_keys.go), in hello and welcome.
	Key   []byte `json:"key,omitempty"`
	Proof []byte `json:"proof,omitempty"`
}

// ctrl is one end of the setup channel. recv never blocks: it returns
// (msg, true) when one has arrived. gone reports the peer went away.
type ctrl interface {
	send(m ctrlMsg) error
	recv() (ctrlMsg, bool)
	gone() error
}

// chanCtrl is the in-process channel (bench).
type chanCtrl struct {
	in   <-chan ctrlMsg
	out  chan<- ctrlMsg
	done <-chan struct{}
}

func chanPair() (chanCtrl, chanCtrl) {
	a, b := make(chan ctrlMsg, 16), make(chan ctrlMsg, 16)
	d := make(chan struct{})
	return chanCtrl{in: a, out: b, done: d}, chanCtrl{in: b, out: a, done: d}
}

func (c chanCtrl) send(m ctrlMsg) error { c.out <- m; return nil }
func (c chanCtrl) recv() (ctrlMsg, bool) {
	select {
	case m := <-c.in:
		return m, true
	default:
		return ctrlMsg{}, false
	}
}
func (c chanCtrl) gone() error { return nil }

// maxCtrlLine bounds one setup message (a JSON line): the largest a genuine
// end sends (a done with 23 results and 64 QPs' counts) is a few KiB, and
// the channel comes from the network, so a longer line ends the channel
// instead of growing the reader's buffer.
const maxCtrlLine = 1 << 20

// errCtrlLine: the peer sent a line longer than maxCtrlLine.
var errCtrlLine = fmt.Errorf("setup message longer than %d bytes", maxCtrlLine)

// tcpCtrl is the TCP channel: a goroutine decodes lines into a channel.
type tcpCtrl struct {
	conn net.Conn
	enc  *json.Encoder
	in   chan ctrlMsg
	err  chan error
	done chan struct{} // closed by close: the reader stops waiting to queue
}

func newTCPCtrl(c net.Conn) *tcpCtrl {
	t := &tcpCtrl{conn: c, enc: json.NewEncoder(c), in: make(chan ctrlMsg, 16), err: make(chan error, 1),
		done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(c)
		sc.Buffer(make([]byte, 0, 4096), maxCtrlLine)
		fail := func(err error) {
			t.err <- err
			close(t.in)
		}
		for sc.Scan() {
			var m ctrlMsg
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				fail(err)
				return
			}
			select {
			case t.in <- m:
			case <-t.done:
				return
			}
		}
		err := sc.Err()
		switch {
		case errors.Is(err, bufio.ErrTooLong):
			err = errCtrlLine
		case err == nil:
			err = io.EOF
		}
		fail(err)
	}()
	return t
}

// close ends the channel and its reader.
func (t *tcpCtrl) close() {
	close(t.done)
	_ = t.conn.Close()
}

func (t *tcpCtrl) send(m ctrlMsg) error {
	_ = t.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return t.enc.Encode(m)
}

func (t *tcpCtrl) recv() (ctrlMsg, bool) {
	select {
	case m, ok := <-t.in:
		return m, ok
	default:
		return ctrlMsg{}, false
	}
}

// gone reports the connection's end only once every message that came
// before it has been received: the reader queues them before the error,
// so a caller that saw recv find nothing just before the peer's last
// message and its close arrived still gets that message next.
func (t *tcpCtrl) gone() error {
	select {
	case err := <-t.err:
		t.err <- err
		if len(t.in) > 0 {
			return nil
		}
		return fmt.Errorf("setup connection: %w", err)
	default:
		return nil
	}
}

// waitMsg waits for a message of type want, running n's backend (when n
// is not nil) so the data path keeps running, until timeout or stop.
func waitMsg(c ctrl, n *node, want string, timeout time.Duration, stop func() bool) (ctrlMsg, error) {
	end := time.Now().Add(timeout)
	if n != nil {
		var got ctrlMsg
		err := n.run(func(verbs.Time) (bool, error) {
			m, ok, err := pollMsg(c, want, end, timeout, stop)
			got = m
			return ok, err
		})
		return got, err
	}
	for {
		m, ok, err := pollMsg(c, want, end, timeout, stop)
		if ok || err != nil {
			return m, err
		}
		time.Sleep(time.Millisecond)
	}
}

// pollMsg is one look for waitMsg's message: ok when it has come, an
// error when another came, the peer went, stop or the wait (timeout,
// ending at end) is over.
func pollMsg(c ctrl, want string, end time.Time, timeout time.Duration, stop func() bool) (ctrlMsg, bool, error) {
	if m, ok := c.recv(); ok {
		if m.Type == "error" {
			return m, false, errors.New("peer: " + m.Err)
		}
		if m.Type != want {
			return m, false, fmt.Errorf("setup: got %q, want %q", m.Type, want)
		}
		return m, true, nil
	}
	if err := c.gone(); err != nil {
		return ctrlMsg{}, false, err
	}
	if stop != nil && stop() {
		return ctrlMsg{}, false, errInterrupted
	}
	if time.Now().After(end) {
		return ctrlMsg{}, false, fmt.Errorf("setup: no %q from the peer within %v", want, timeout)
	}
	return ctrlMsg{}, false, nil
}
