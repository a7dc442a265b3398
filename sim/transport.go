package sim

import (
	"fmt"
	"strings"

	"github.com/metaroce/metaroce/verbs"
)

// Transport is what the simulator needs from a transport implementation
// (metaroce, the RoCEv2 baseline, ...). The verbs objects differ per
// transport (they are concrete types), so each transport has one adapter
// file in this package that implements Transport and World, and one line
// in the transports table (registry.go); nothing else in the simulator
// names a transport.
type Transport interface {
	// Name is how experiment files and result rows name the transport.
	Name() string
	// UDPPort is the destination port of the transport's packets: ECMP
	// hashes it and --pcap writes it.
	UDPPort() uint16
	// NewParams returns a pointer to the transport's parameter struct,
	// filled with its defaults; the experiment's transport.<name> section
	// is decoded into it (strictly: unknown keys are errors).
	NewParams() any
	// PacketLens returns the size of a full data packet and of a typical
	// acknowledgement, for the base RTT.
	PacketLens(mtu int) (data, ack int)
	// NewWorld builds the transport endpoints of every host.
	NewWorld(env WorldEnv, params any) (World, error)
}

// paramsChecker is an optional extension of Transport: it checks a run's
// decoded parameters when the experiment is loaded, so a bad value is a
// load error naming its key.
type paramsChecker interface {
	CheckParams(c *Config, params any) error
}

// WorldEnv is what a transport needs to know to build the hosts' endpoints.
type WorldEnv struct {
	Hosts  int
	Planes int // NIC ports per host: TxMeta.Plane must be below this
	MTU    int
	// NICGbps is the rate of each NIC port (transports that pace need it).
	NICGbps float64
	// MaxMessage is the largest message any connection posts: the memory
	// each host registers as source and as remote-write target.
	MaxMessage int
	// Outstanding is the most messages one connection has posted at once.
	Outstanding int
	Seed        uint64
	// Ops are the operations the workload posts (workload.ops; never
	// empty): the adapter registers readable memory only when OpRead is
	// among them, and posts receives with a buffer only when a SEND is.
	Ops []Op
}

// Op is the operation of one message (workload.ops). The zero value,
// OpWriteImm, is what every workload posts by default.
type Op uint8

const (
	OpWriteImm Op = iota // RDMA WRITE with immediate: data placed in the peer's region, a receive completion there
	OpWrite              // RDMA WRITE: data placed in the peer's region, no completion there
	OpSend               // SEND: data placed in the peer's next posted receive
	OpSendImm            // SEND with immediate
	OpRead               // RDMA READ: the connection's source reads n bytes of the peer's region into its own buffer
	numOps
)

var opNames = [numOps]string{"write_imm", "write", "send", "send_imm", "read"}

func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// ParseOp returns the operation named s (write, write_imm, send,
// send_imm, read).
func ParseOp(s string) (Op, error) {
	for i, n := range opNames {
		if n == s {
			return Op(i), nil
		}
	}
	return 0, fmt.Errorf("unknown operation %q (want %s)", s, strings.Join(opNames[:], ", "))
}

// consumesRecv says whether op uses a receive at the peer (and so gives a
// receive completion there).
func (o Op) consumesRecv() bool { return o == OpWriteImm || o == OpSend || o == OpSendImm }

// hasOp says whether ops contains any of want.
func hasOp(ops []Op, want ...Op) bool {
	for _, o := range ops {
		for _, w := range want {
			if o == w {
				return true
			}
		}
	}
	return false
}

// memAccess is how a host registers its two buffers for the operations
// ops: the source buffer (what WRITEs and SENDs send; where READs land:
// local write only when READs are posted) and the region the peer works
// on (WRITEs land there, READs read it: remote read only when READs are
// posted; it also backs the posted receives of SENDs).
func memAccess(ops []Op) (src, dst verbs.Access) {
	dst = verbs.AccessLocalWrite | verbs.AccessRemoteWrite
	if hasOp(ops, OpRead) {
		src |= verbs.AccessLocalWrite
		dst |= verbs.AccessRemoteRead
	}
	return src, dst
}

// recvLen is the buffer of each receive an adapter posts: a whole message
// when SENDs are posted, none otherwise (a WRITE_IMM's receive needs no
// buffer).
func recvLen(env WorldEnv) int {
	if hasOp(env.Ops, OpSend, OpSendImm) {
		return env.MaxMessage
	}
	return 0
}

// wrID packs a message's id and operation into a work request id, so that
// the sender's completion says which operation it was. For OpWriteImm (0)
// it is the id itself.
func wrID(op Op, id uint32) uint64 { return uint64(op)<<32 | uint64(id) }

// splitWRID undoes wrID.
func splitWRID(v uint64) (Op, uint32) { return Op(v >> 32), uint32(v) }

// idQueue is a FIFO of message ids, for the receive completions of SENDs
// (which carry no immediate): an RC queue pair completes its receives in
// the order the messages were posted. It reuses its array once grown.
type idQueue struct {
	buf        []uint32
	head, size int
}

func (q *idQueue) push(v uint32) {
	if q.size == len(q.buf) {
		nb := make([]uint32, max(8, 2*len(q.buf)))
		for i := 0; i < q.size; i++ {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = v
	q.size++
}

// pop returns the oldest id, or 0 when there is none.
func (q *idQueue) pop() uint32 {
	if q.size == 0 {
		return 0
	}
	v := q.buf[q.head]
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return v
}

// World is every host's endpoint of one transport in one run. All calls
// come from the run's goroutine.
type World interface {
	// Host is host i's endpoint; the simulator drives it through the
	// packet interface only.
	Host(i int) verbs.Transport
	// Dial opens a connection from host src to host dst with one queue
	// pair at each end; the destination accepts it by itself. Messages may
	// be posted at once.
	Dial(now verbs.Time, src, dst int) (ConnRef, error)
	// Post sends a message of n bytes on c with operation op (one of
	// WorldEnv.Ops); id comes back in both completions. A message that
	// gives no receive completion at the peer (OpWrite, OpRead) is
	// reported as arrived (a Recv completion, from the dialer's host) when
	// its sender's completion is polled, after the data was placed: a
	// WRITE's acknowledgement, a READ's last response.
	Post(now verbs.Time, c ConnRef, op Op, n int, id uint32) error
	// Poll hands every completion waiting at host h to sink, after doing
	// whatever the host's application owes its transport (accepting
	// connections, posting receives).
	Poll(now verbs.Time, h int, sink func(Completion))
	// Delivered is the payload placed so far by c's messages, at either
	// end (a READ places its data at the dialer).
	Delivered(c ConnRef) uint64
	// Counters returns the transport's own counters summed over every
	// connection of the run, in a fixed order, named in snake_case.
	Counters() []Field
}

// sendWR builds the work request for one workload message: both transports
// take verbs.SendWR. remote and rkey name the
// peer's region, used by the operations that address it.
func sendWR(op Op, id uint32, local verbs.SGE, remote uint64, rkey verbs.RKey) (verbs.SendWR, error) {
	wr := verbs.SendWR{ID: wrID(op, id), Local: local}
	switch op {
	case OpWriteImm, OpWrite, OpRead:
		wr.RemoteAddr, wr.RKey = remote, rkey
	}
	switch op {
	case OpWriteImm:
		wr.Opcode, wr.Imm = verbs.WRWriteImm, id
	case OpWrite:
		wr.Opcode = verbs.WRWrite
	case OpSend:
		wr.Opcode = verbs.WRSend
	case OpSendImm:
		wr.Opcode, wr.Imm = verbs.WRSendImm, id
	case OpRead:
		wr.Opcode = verbs.WRRead
	default:
		return wr, fmt.Errorf("operation %v", op)
	}
	return wr, nil
}
