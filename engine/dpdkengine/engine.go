//go:build dpdk

package dpdkengine

import (
	"errors"
	"fmt"
	"github.com/metaroce/metaroce/verbs"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metaroce/metaroce/dpdk"
	"github.com/metaroce/metaroce/lcore"
	"github.com/metaroce/metaroce/mempool"
)

// port is one configured DPDK port and what the data path needs to know
// about it.
type port struct {
	id     dpdk.PortID
	name   string
	mac    MAC
	ip     IPv4
	bits   int              // prefix length of ip
	gw     verbs.PeerHandle // neighbour handle of the gateway, or noGateway
	queues int
	// ifIndex: the kernel interface of an af_packet port (0 otherwise),
	// whose packet sockets' ring drops the engine reads (afpacket.go).
	ifIndex int

	txIPOffload, txUDPOffload bool
	rxIPOffload, rxUDPOffload bool
	udpSoft                   bool   // tx UDP checksum in software
	udpZero                   bool   // tx UDP checksum 0 (udp_checksum: zero)
	txFlags                   uint64 // ol_flags for every data frame
	multiSeg                  bool   // tx takes chained mbufs (zero-copy TX)
}

const noGateway = verbs.PeerHandle(1<<32 - 1)

// nextHop returns the neighbour whose MAC a packet to ip needs: the peer
// itself when on-link, else the port's gateway.
func (p *port) nextHop(peer verbs.PeerHandle, ip IPv4) verbs.PeerHandle {
	if p.gw == noGateway || sameSubnet(p.ip, ip, p.bits) {
		return peer
	}
	return p.gw
}

// Engine is the DPDK backend: the EAL, one mbuf pool, the ports, and the
// shards that run transport cores over them.
//
// Start and Close are for the application's goroutine; each Shard runs on
// its own locked OS thread.
type Engine struct {
	cfg    Config
	pool   *dpdk.Pool
	ports  []*port
	mu     sync.Mutex
	shards []*Shard
	loops  []*lcore.Loop
	neigh  *neighTable
	closed bool
	ring   ringDrops // af_packet receive-ring drops of the ports (afpacket.go)
}

var engineSeq atomic.Uint64

// Start starts the EAL (unless it already runs: then cfg.EAL is ignored),
// creates the mbuf pool and configures and starts every port. Warnings
// (such as --no-huge) go to warn when not nil. When Start initialises the
// EAL, it locks the calling goroutine to its OS thread for good (that
// thread is the main lcore).
func Start(cfg Config, warn io.Writer) (*Engine, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !dpdk.Initialized() {
		// memif vdevs without a bsize get buffers that hold an mbuf's
		// data (openPort refuses smaller ones: docs/dpdk.md).
		var raised []string
		if cfg.EAL, raised = memifEAL(cfg.EAL, cfg.DataRoom); len(raised) > 0 && warn != nil {
			fmt.Fprintf(warn, "dpdk engine: %s: bsize=%d (memif buffers that hold data_room %d less the headroom)\n",
				strings.Join(raised, ", "), cfg.DataRoom-mbufHeadroom, cfg.DataRoom)
		}
		if _, err := dpdk.Init(cfg.EAL); err != nil {
			return nil, err
		}
	}
	neigh, err := newNeighTable(cfg.Neighbours, len(cfg.Ports), cfg.MaxLearnedPeers)
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, neigh: neigh}
	pool, err := mempool.NewMbufPool(fmt.Sprintf("mr_pool_%d", engineSeq.Add(1)), cfg.PoolSize, cfg.DataRoom, warn)
	if err != nil {
		return nil, err
	}
	e.pool = pool
	for _, pc := range cfg.Ports {
		p, err := e.openPort(pc)
		if err != nil {
			e.closePorts()
			pool.Free()
			return nil, err
		}
		e.ports = append(e.ports, p)
	}
	if err := e.ring.find(e.ifIndexes(), "af_packet"); err != nil && warn != nil {
		fmt.Fprintf(warn, "dpdk engine: af_packet ring drops will not be counted: %v\n", err)
	}
	return e, nil
}

func (e *Engine) openPort(pc PortConfig) (*port, error) {
	id, err := dpdk.PortByName(pc.Name)
	if err != nil {
		return nil, err
	}
	info, err := id.Info()
	if err != nil {
		return nil, err
	}
	if info.Driver == "net_memif" {
		if err := checkMemifBuf(pc.Name, id.DevArgs(), e.cfg.DataRoom); err != nil {
			return nil, err
		}
	}
	if info.MaxRxQueues < pc.Queues || info.MaxTxQueues < pc.Queues {
		return nil, fmt.Errorf("dpdk engine: port %s: %d queues asked, driver %s allows %d rx / %d tx",
			pc.Name, pc.Queues, info.Driver, info.MaxRxQueues, info.MaxTxQueues)
	}
	ip, bits, _ := parseCIDR(pc.IP)
	p := &port{id: id, name: pc.Name, ip: ip, bits: bits, queues: pc.Queues, gw: noGateway}
	if info.Driver == "net_af_packet" {
		p.ifIndex = info.IfIndex
	}
	if pc.Gateway != "" {
		gw, _ := parseIP(pc.Gateway)
		// The gateway gets a handle in the neighbour table, so ARP
		// resolves and refreshes it like any neighbour.
		h, ok := newNeighbours(e.neigh).lookup(gw, learnTold)
		if !ok {
			return nil, fmt.Errorf("dpdk engine: port %s: neighbour table full", pc.Name)
		}
		p.gw = h
	}
	var rxoff, txoff uint64
	p.udpZero = e.cfg.UDPChecksum == "zero"
	if e.cfg.Checksum != "software" {
		// Offload what the port offers; the rest is done in software. A
		// zero UDP checksum needs no tx offload, but a peer's non-zero
		// one is still best verified by the port.
		p.rxIPOffload = info.RxOffloads&dpdk.RxOffloadIPv4Cksum != 0
		p.rxUDPOffload = info.RxOffloads&dpdk.RxOffloadUDPCksum != 0
		p.txIPOffload = info.TxOffloads&dpdk.TxOffloadIPv4Cksum != 0
		p.txUDPOffload = !p.udpZero && info.TxOffloads&dpdk.TxOffloadUDPCksum != 0
	}
	p.udpSoft = !p.txUDPOffload && !p.udpZero
	if p.rxIPOffload {
		rxoff |= dpdk.RxOffloadIPv4Cksum
	}
	if p.rxUDPOffload {
		rxoff |= dpdk.RxOffloadUDPCksum
	}
	if p.txIPOffload {
		txoff |= dpdk.TxOffloadIPv4Cksum
		p.txFlags |= dpdk.TxIPv4 | dpdk.TxIPCksum
	}
	if p.txUDPOffload {
		txoff |= dpdk.TxOffloadUDPCksum
		p.txFlags |= dpdk.TxIPv4 | dpdk.TxUDPCksum
	}
	if e.cfg.ZeroCopyMin > 0 && info.TxOffloads&dpdk.TxOffloadMultiSegs != 0 {
		txoff |= dpdk.TxOffloadMultiSegs
		p.multiSeg = true
	}
	if err := id.Configure(dpdk.PortConfig{RxQueues: pc.Queues, TxQueues: pc.Queues, RxDesc: e.cfg.RxDesc, TxDesc: e.cfg.TxDesc,
		Pool: e.pool, RxOffloads: rxoff, TxOffloads: txoff, Promiscuous: false}); err != nil {
		return nil, err
	}
	mac, err := id.MAC()
	if err != nil {
		return nil, err
	}
	p.mac = MAC(mac)
	if err := id.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// Config is the engine's effective configuration.
func (e *Engine) Config() Config { return e.cfg }

// Pool is the engine's mbuf pool.
func (e *Engine) Pool() *dpdk.Pool { return e.pool }

// PortInfo describes a port as the engine runs it.
type PortInfo struct {
	Name       string
	ID         dpdk.PortID
	MAC        MAC
	IP         IPv4
	Queues     int
	IPOffload  bool // IPv4 header checksum offloaded on tx
	UDPOffload bool // UDP checksum offloaded on tx
	UDPSoft    bool // UDP checksum computed in software
	UDPZero    bool // UDP checksum sent as 0 (the transport's CRC covers the packet)
	RxOffload  bool // received checksums verified by the port (IPv4 header and UDP)
}

// Ports describes the engine's ports, in plane order.
func (e *Engine) Ports() []PortInfo {
	out := make([]PortInfo, len(e.ports))
	for i, p := range e.ports {
		out[i] = PortInfo{Name: p.name, ID: p.id, MAC: p.mac, IP: p.ip, Queues: p.queues,
			IPOffload: p.txIPOffload, UDPOffload: p.txUDPOffload, UDPSoft: p.udpSoft, UDPZero: p.udpZero,
			RxOffload: p.rxIPOffload && p.rxUDPOffload}
	}
	return out
}

// PeerIP returns the IPv4 address of a peer handle (a static neighbour or
// one learned from an arriving packet). Safe from any goroutine: transport
// cores that put addresses into their packets (the RoCEv2 baseline's ICRC
// covers the IP header) look peers up with it, e.g.
// rocev2.Config{PeerIP: func(h) rocev2.IPv4 { ip, _ := e.PeerIP(h); return ip }}.
func (e *Engine) PeerIP(h verbs.PeerHandle) (ip [4]byte, ok bool) {
	if int(h) >= maxPeers || !e.neigh.used[h].Load() {
		return ip, false
	}
	e.neigh.mu.Lock()
	defer e.neigh.mu.Unlock()
	return e.neigh.ip[h], true
}

// WaitLink waits until every port reports its link up.
func (e *Engine) WaitLink(timeout time.Duration) error { return e.waitLink(true, timeout) }

// WaitLinkDown waits until every port reports its link down: after the
// peer of a memif port closed, this is when the EAL interrupt thread has
// processed the disconnect, and only then may the port be closed safely
// (memif's disconnect handling races with rte_eth_dev_close; seen as a
// crash in eal-intr-thread when both ends of a pair live in one process).
func (e *Engine) WaitLinkDown(timeout time.Duration) error { return e.waitLink(false, timeout) }

func (e *Engine) waitLink(up bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		wrong := ""
		for _, p := range e.ports {
			l, err := p.id.Link()
			if err != nil {
				return err
			}
			if l.Up != up {
				wrong = p.name
				break
			}
		}
		if wrong == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dpdk engine: link of %s still %s after %v", wrong, map[bool]string{true: "down", false: "up"}[up], timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// Run starts a shard that runs tr over the engine's ports, using queue 0
// of each. From now on tr belongs to the shard's goroutine: reach it with
// Shard.Do. One engine runs one directly attached shard; more shards over
// the same ports need the lcore package's steering.
func (e *Engine) Run(tr verbs.Transport) (*Shard, error) { return e.run(tr, false) }

// run starts the queue-0 shard; a held one runs only inside RunApp.
func (e *Engine) run(tr verbs.Transport, held bool) (*Shard, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errors.New("dpdk engine: closed")
	}
	if len(e.shards) > 0 {
		return nil, errors.New("dpdk engine: queue 0 already has a shard")
	}
	s, err := newShard(e, tr, &directIO{ports: e.ports, q: 0}, 0)
	if err != nil {
		return nil, err
	}
	s.held = held
	if err := e.startShard(s); err != nil {
		return nil, err
	}
	return s, nil
}

func (e *Engine) startShard(s *Shard) error {
	started := make(chan error, 1)
	go s.run(started)
	if err := <-started; err != nil {
		return err
	}
	e.shards = append(e.shards, s)
	return nil
}

// Stop stops every shard and waits for them (they free the mbufs they
// hold).
func (e *Engine) Stop() {
	e.mu.Lock()
	shards := e.shards
	e.mu.Unlock()
	for _, s := range shards {
		s.cmdMu.Lock()
		s.stop.Store(true)
		s.cmdMu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	for _, s := range shards {
		<-s.done
	}
	e.mu.Lock()
	loops := e.loops
	e.loops = nil
	e.mu.Unlock()
	for _, l := range loops {
		l.Stop() // after the shards: it frees what is left in the rings
	}
}

// Close stops the shards, then stops and closes every port and frees the
// pool. The EAL keeps running (dpdk.Cleanup ends it).
func (e *Engine) Close() error {
	e.Stop()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	err := e.closePorts()
	if e.pool != nil {
		e.pool.Free()
	}
	return err
}

func (e *Engine) closePorts() error {
	var errs []error
	for _, p := range e.ports {
		if err := p.id.Stop(); err != nil {
			errs = append(errs, err)
		}
		if err := p.id.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ringIO: the shard's frames come from and go to rte_rings of the lcore
// loops, one loop per port.
type ringIO struct {
	loops []*lcore.Loop
	k     int
}

func (r *ringIO) rx(i int, out []*dpdk.Mbuf) int  { return r.loops[i].RxRing(r.k).Dequeue(out) }
func (r *ringIO) tx(i int, pkts []*dpdk.Mbuf) int { return r.loops[i].TxRing(r.k).Enqueue(pkts) }

// io is the rings' driver work: separate ring bursts and a free (the C
// lcore loop polls the port; the shard does not wait here).
func (r *ringIO) io(i int, tx, frees, rx []*dpdk.Mbuf, _ uint64, _ *dpdk.Word) (dpdk.IOResult, int) {
	var res dpdk.IOResult
	calls := 1
	if len(tx) > 0 {
		res.Sent = r.tx(i, tx)
		calls++
	}
	if len(frees) > 0 {
		dpdk.FreeBulk(frees)
		calls++
	}
	res.Got, res.Polls = r.rx(i, rx), 1
	return res, calls
}

func (r *ringIO) canWait() bool { return false }

// RunSharded starts one C lcore loop per port, on lcores[i] for port i
// (EAL worker lcores), owning queue 0 of that port, and one shard per
// transport. Shard k listens on UDP port UDPPort+k and sends to the same
// port at its peers, so shard k of one host talks to shard k of another;
// the loops steer on that destination port, which spraying never changes,
// so each connection stays on one shard. Each transport then belongs to
// its shard's goroutine (use Shard.Do).
func (e *Engine) RunSharded(trs []verbs.Transport, lcores []int) ([]*Shard, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errors.New("dpdk engine: closed")
	}
	if len(e.shards) > 0 {
		return nil, errors.New("dpdk engine: shards already run")
	}
	if len(lcores) != len(e.ports) {
		return nil, fmt.Errorf("dpdk engine: %d lcores for %d ports (one loop per port)", len(lcores), len(e.ports))
	}
	if len(trs) < 1 || len(trs) > lcore.MaxShards || int(e.cfg.UDPPort)+len(trs) > 65536 {
		return nil, fmt.Errorf("dpdk engine: %d shards outside 1..%d", len(trs), lcore.MaxShards)
	}
	for i, p := range e.ports {
		l, err := lcore.Launch(lcore.Config{Lcore: lcores[i], Port: p.id, Shards: len(trs), BasePort: e.cfg.UDPPort,
			Burst: min(e.cfg.Burst, 64), MaxSleepUs: int(e.cfg.MaxIdleSleep / time.Microsecond)})
		if err != nil {
			for _, l := range e.loops {
				l.Stop()
			}
			e.loops = nil
			return nil, err
		}
		e.loops = append(e.loops, l)
	}
	var out []*Shard
	for k, tr := range trs {
		s, err := newShard(e, tr, &ringIO{loops: e.loops, k: k}, k)
		if err == nil {
			err = e.startShard(s)
		}
		if err != nil {
			e.mu.Unlock()
			e.Stop()
			e.mu.Lock()
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// LoopStats returns the counters of the lcore loops (one per port), or
// nil when the shards are attached directly.
func (e *Engine) LoopStats() []lcore.Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []lcore.Stats
	for _, l := range e.loops {
		out = append(out, l.Stats())
	}
	return out
}
