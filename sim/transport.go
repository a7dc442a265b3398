package sim

import (
	"fmt"
	"sort"
	"sync"

	mr "github.com/metaroce/metaroce/metaroce"
)

// Transport is what the simulator needs from a transport implementation
// (metaroce, the RoCEv2 baseline, ...). The verbs objects differ per
// transport (they are concrete types), so each transport has one adapter
// file in this package that implements Transport and World and registers
// itself from init; nothing else in the simulator names a transport.
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
}

// ConnRef names a connection in a World: the index of the Dial that
// opened it.
type ConnRef int32

// Completion is a finished message, at either end of its connection.
type Completion struct {
	Conn ConnRef
	// Recv: the message arrived at the receiver (all of it placed);
	// otherwise: the sender learned it was delivered.
	Recv  bool
	ID    uint32 // what Post was given
	Bytes int
	OK    bool // false: the work request failed (any error status)
}

// World is every host's endpoint of one transport in one run. All calls
// come from the run's goroutine.
type World interface {
	// Host is host i's endpoint; the simulator drives it through the
	// packet interface only.
	Host(i int) mr.Transport
	// Dial opens a connection from host src to host dst with one queue
	// pair at each end; the destination accepts it by itself. Messages may
	// be posted at once.
	Dial(now mr.Time, src, dst int) (ConnRef, error)
	// Post sends a message of n bytes on c (an RDMA WRITE that also
	// notifies the receiver, i.e. WRITE_IMM); id comes back in both
	// completions.
	Post(now mr.Time, c ConnRef, n int, id uint32) error
	// Poll hands every completion waiting at host h to sink, after doing
	// whatever the host's application owes its transport (accepting
	// connections, posting receives).
	Poll(now mr.Time, h int, sink func(Completion))
	// Delivered is the payload placed so far at c's receiver.
	Delivered(c ConnRef) uint64
	// Counters returns the transport's own counters summed over every
	// connection of the run, in a fixed order, named in snake_case.
	Counters() []Field
}

var (
	regMu      sync.Mutex
	registered = map[string]Transport{}
)

// Register makes a transport available to experiments. Adapters call it
// from init.
func Register(t Transport) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registered[t.Name()]; dup {
		panic(fmt.Sprintf("sim: transport %q registered twice", t.Name()))
	}
	registered[t.Name()] = t
}

// Transports returns the registered transports' names, metaroce first and
// the rest in name order, the default order of side-by-side results.
func Transports() []string {
	regMu.Lock()
	defer regMu.Unlock()
	names := make([]string, 0, len(registered))
	for n := range registered {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == "metaroce") != (names[j] == "metaroce") {
			return names[i] == "metaroce"
		}
		return names[i] < names[j]
	})
	return names
}

func lookupTransport(name string) (Transport, bool) {
	regMu.Lock()
	defer regMu.Unlock()
	t, ok := registered[name]
	return t, ok
}
