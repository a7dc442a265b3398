//go:build dpdk

package dpdk

/*
#include "mr_dpdk.h"
#include <rte_dev.h>
#include <rte_devargs.h>

static int mr_port_configure(uint16_t port, uint16_t nrx, uint16_t ntx,
	uint64_t rxoff, uint64_t txoff, uint32_t mtu)
{
	struct rte_eth_conf conf;
	memset(&conf, 0, sizeof(conf));
	conf.rxmode.offloads = rxoff;
	conf.txmode.offloads = txoff;
	if (mtu)
		conf.rxmode.mtu = mtu;
	return rte_eth_dev_configure(port, nrx, ntx, &conf);
}

static int mr_rxq_setup(uint16_t port, uint16_t q, uint16_t desc, struct rte_mempool *mp, uint64_t off)
{
	struct rte_eth_dev_info info;
	int ret = rte_eth_dev_info_get(port, &info);
	if (ret)
		return ret;
	struct rte_eth_rxconf c = info.default_rxconf;
	c.offloads = off;
	return rte_eth_rx_queue_setup(port, q, desc, rte_eth_dev_socket_id(port), &c, mp);
}

// mr_port_devargs is the driver arguments the port's device was created
// with (a --vdev's "key=value,..." after its name), or NULL.
static const char *mr_port_devargs(uint16_t port)
{
	struct rte_eth_dev_info info;
	if (rte_eth_dev_info_get(port, &info) != 0 || info.device == NULL)
		return NULL;
	const struct rte_devargs *da = rte_dev_devargs(info.device);
	return da != NULL ? da->args : NULL;
}

static int mr_txq_setup(uint16_t port, uint16_t q, uint16_t desc, uint64_t off)
{
	struct rte_eth_dev_info info;
	int ret = rte_eth_dev_info_get(port, &info);
	if (ret)
		return ret;
	struct rte_eth_txconf c = info.default_txconf;
	c.offloads = off;
	return rte_eth_tx_queue_setup(port, q, desc, rte_eth_dev_socket_id(port), &c);
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"strings"
	"unsafe"
)

// PortID is a DPDK ethdev port.
type PortID uint16

// Offload capability bits (rte_ethdev.h) the data path uses.
const (
	RxOffloadIPv4Cksum = uint64(C.RTE_ETH_RX_OFFLOAD_IPV4_CKSUM)
	RxOffloadUDPCksum  = uint64(C.RTE_ETH_RX_OFFLOAD_UDP_CKSUM)
	TxOffloadIPv4Cksum = uint64(C.RTE_ETH_TX_OFFLOAD_IPV4_CKSUM)
	TxOffloadUDPCksum  = uint64(C.RTE_ETH_TX_OFFLOAD_UDP_CKSUM)
	TxOffloadMultiSegs = uint64(C.RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
)

// Ports lists the available ports.
func Ports() []PortID {
	var out []PortID
	for p := C.rte_eth_find_next_owned_by(0, 0); p < C.RTE_MAX_ETHPORTS; p = C.rte_eth_find_next_owned_by(C.uint16_t(p+1), 0) {
		out = append(out, PortID(p))
	}
	return out
}

// PortByName finds a port by device name (the vdev name, e.g. net_memif0,
// or a PCI address).
func PortByName(name string) (PortID, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var id C.uint16_t
	if ret := C.rte_eth_dev_get_port_by_name(cn, &id); ret != 0 {
		return 0, fmt.Errorf("dpdk: no port named %q (known: %s)", name, strings.Join(portNames(), ", "))
	}
	return PortID(id), nil
}

func portNames() []string {
	var out []string
	for _, p := range Ports() {
		out = append(out, p.Name())
	}
	return out
}

// Name is the device name.
func (p PortID) Name() string {
	var buf [C.RTE_ETH_NAME_MAX_LEN]C.char
	if C.rte_eth_dev_get_name_by_port(C.uint16_t(p), &buf[0]) != 0 {
		return fmt.Sprintf("port%d", p)
	}
	return C.GoString(&buf[0])
}

// DevArgs is the driver arguments the port's device was created with: for
// a vdev, what follows its name in --vdev ("role=server,id=0,..."); ""
// when there are none.
func (p PortID) DevArgs() string {
	if a := C.mr_port_devargs(C.uint16_t(p)); a != nil {
		return C.GoString(a)
	}
	return ""
}

// DevInfo is what a port's driver reports about itself.
type DevInfo struct {
	Driver       string
	MaxRxQueues  int
	MaxTxQueues  int
	RxOffloads   uint64 // rx offload capabilities
	TxOffloads   uint64 // tx offload capabilities
	MinMTU       int
	MaxMTU       int
	MaxRxPktLen  int
	DefaultMTU   int
	RxDescMax    int
	TxDescMax    int
	SocketID     int
	MaxLROPktLen int
	// IfIndex is the kernel interface the port is bound to (af_packet,
	// tap), 0 if none.
	IfIndex int
}

// Info returns the port's capabilities (rte_eth_dev_info_get).
func (p PortID) Info() (DevInfo, error) {
	var di C.struct_rte_eth_dev_info
	if err := errRet("rte_eth_dev_info_get", C.rte_eth_dev_info_get(C.uint16_t(p), &di)); err != nil {
		return DevInfo{}, err
	}
	return DevInfo{
		Driver:      C.GoString(di.driver_name),
		MaxRxQueues: int(di.max_rx_queues), MaxTxQueues: int(di.max_tx_queues),
		RxOffloads: uint64(di.rx_offload_capa), TxOffloads: uint64(di.tx_offload_capa),
		MinMTU: int(di.min_mtu), MaxMTU: int(di.max_mtu), MaxRxPktLen: int(di.max_rx_pktlen),
		RxDescMax: int(di.rx_desc_lim.nb_max), TxDescMax: int(di.tx_desc_lim.nb_max),
		SocketID: int(C.rte_eth_dev_socket_id(C.uint16_t(p))),
		IfIndex:  int(di.if_index),
	}, nil
}

// PortConfig is how a port is set up. Offloads not in the port's
// capabilities are an error (Configure names them), so callers mask them
// with Info first.
type PortConfig struct {
	RxQueues, TxQueues int
	RxDesc, TxDesc     int // 0: 1024
	Pool               *Pool
	RxOffloads         uint64
	TxOffloads         uint64
	MTU                int // 0: the driver's default
	Promiscuous        bool
}

// Configure configures the port and sets up every queue. The port must be
// stopped.
func (p PortID) Configure(c PortConfig) error {
	if c.RxQueues < 1 || c.TxQueues < 1 || c.Pool == nil {
		return fmt.Errorf("dpdk: port %s: need >= 1 rx and tx queue and a pool", p.Name())
	}
	info, err := p.Info()
	if err != nil {
		return err
	}
	if bad := c.RxOffloads &^ info.RxOffloads; bad != 0 {
		return fmt.Errorf("dpdk: port %s: rx offloads %#x not supported (capabilities %#x)", p.Name(), bad, info.RxOffloads)
	}
	if bad := c.TxOffloads &^ info.TxOffloads; bad != 0 {
		return fmt.Errorf("dpdk: port %s: tx offloads %#x not supported (capabilities %#x)", p.Name(), bad, info.TxOffloads)
	}
	rxd, txd := c.RxDesc, c.TxDesc
	if rxd == 0 {
		rxd = 1024
	}
	if txd == 0 {
		txd = 1024
	}
	port := C.uint16_t(p)
	if err := errRet("rte_eth_dev_configure "+p.Name(), C.mr_port_configure(port, C.uint16_t(c.RxQueues), C.uint16_t(c.TxQueues),
		C.uint64_t(c.RxOffloads), C.uint64_t(c.TxOffloads), C.uint32_t(c.MTU))); err != nil {
		return err
	}
	for q := 0; q < c.RxQueues; q++ {
		if err := errRet(fmt.Sprintf("rx queue %d setup on %s", q, p.Name()),
			C.mr_rxq_setup(port, C.uint16_t(q), C.uint16_t(rxd), c.Pool.p, C.uint64_t(c.RxOffloads))); err != nil {
			return err
		}
	}
	for q := 0; q < c.TxQueues; q++ {
		if err := errRet(fmt.Sprintf("tx queue %d setup on %s", q, p.Name()),
			C.mr_txq_setup(port, C.uint16_t(q), C.uint16_t(txd), C.uint64_t(c.TxOffloads))); err != nil {
			return err
		}
	}
	if c.Promiscuous {
		// Not every PMD has a promiscuous mode (memif has none); that is
		// not an error for us, frames to other MACs are filtered in software.
		C.rte_eth_promiscuous_enable(port)
	}
	return nil
}

// Start starts the port.
func (p PortID) Start() error {
	return errRet("rte_eth_dev_start "+p.Name(), C.rte_eth_dev_start(C.uint16_t(p)))
}

// Stop stops the port.
func (p PortID) Stop() error {
	return errRet("rte_eth_dev_stop "+p.Name(), C.rte_eth_dev_stop(C.uint16_t(p)))
}

// Close releases the port (after Stop).
func (p PortID) Close() error {
	return errRet("rte_eth_dev_close "+p.Name(), C.rte_eth_dev_close(C.uint16_t(p)))
}

// MAC is the port's Ethernet address.
func (p PortID) MAC() ([6]byte, error) {
	var a C.struct_rte_ether_addr
	if err := errRet("rte_eth_macaddr_get", C.rte_eth_macaddr_get(C.uint16_t(p), &a)); err != nil {
		return [6]byte{}, err
	}
	var out [6]byte
	for i := range out {
		out[i] = byte(a.addr_bytes[i])
	}
	return out, nil
}

// Link is a port's link state.
type Link struct {
	Up        bool
	SpeedMbps uint32
	FullDup   bool
}

// Link returns the link state without waiting.
func (p PortID) Link() (Link, error) {
	var l C.struct_rte_eth_link
	if err := errRet("rte_eth_link_get_nowait", C.rte_eth_link_get_nowait(C.uint16_t(p), &l)); err != nil {
		return Link{}, err
	}
	// link_status/duplex are bitfields; read them through rte_eth_link's
	// documented packing via the C accessors of the struct.
	raw := *(*uint64)(unsafe.Pointer(&l))
	return Link{SpeedMbps: uint32(raw), FullDup: raw>>32&1 == 1, Up: raw>>34&1 == 1}, nil
}

// Stats are a port's basic counters.
type Stats struct {
	IPackets, OPackets uint64
	IBytes, OBytes     uint64
	IMissed, IErrors   uint64
	OErrors, RxNoMbuf  uint64
}

// Stats returns the basic counters (rte_eth_stats_get).
func (p PortID) Stats() (Stats, error) {
	var s C.struct_rte_eth_stats
	if err := errRet("rte_eth_stats_get", C.rte_eth_stats_get(C.uint16_t(p), &s)); err != nil {
		return Stats{}, err
	}
	return Stats{IPackets: uint64(s.ipackets), OPackets: uint64(s.opackets), IBytes: uint64(s.ibytes),
		OBytes: uint64(s.obytes), IMissed: uint64(s.imissed), IErrors: uint64(s.ierrors),
		OErrors: uint64(s.oerrors), RxNoMbuf: uint64(s.rx_nombuf)}, nil
}

// XStat is one extended statistic.
type XStat struct {
	Name  string
	Value uint64
}

// XStats returns every extended statistic of the port.
func (p PortID) XStats() ([]XStat, error) {
	port := C.uint16_t(p)
	n := C.rte_eth_xstats_get_names(port, nil, 0)
	if n < 0 {
		return nil, errRet("rte_eth_xstats_get_names", n)
	}
	if n == 0 {
		return nil, nil
	}
	names := make([]C.struct_rte_eth_xstat_name, n)
	vals := make([]C.struct_rte_eth_xstat, n)
	if m := C.rte_eth_xstats_get_names(port, &names[0], C.uint(n)); m != n {
		return nil, fmt.Errorf("dpdk: xstats names of %s changed size (%d != %d)", p.Name(), m, n)
	}
	if m := C.rte_eth_xstats_get(port, &vals[0], C.uint(n)); m != n {
		return nil, fmt.Errorf("dpdk: xstats of %s changed size (%d != %d)", p.Name(), m, n)
	}
	out := make([]XStat, 0, n)
	for _, v := range vals {
		if int(v.id) < len(names) {
			out = append(out, XStat{Name: C.GoString(&names[v.id].name[0]), Value: uint64(v.value)})
		}
	}
	return out, nil
}

// RxBurst receives up to len(out) packets from queue q (one cgo call).
// The caller owns the returned mbufs.
func (p PortID) RxBurst(q uint16, out []*Mbuf) int {
	defer runtime.KeepAlive(out) // passed to C as an integer (see mbufs)
	if len(out) == 0 {
		return 0
	}
	return int(C.mr_rx_burst(C.uint16_t(p), C.uint16_t(q), mbufs(out), C.uint16_t(len(out))))
}

// TxBurst hands pkts to queue q (one cgo call) and returns how many the
// queue took; those now belong to the driver, the caller keeps pkts[n:].
func (p PortID) TxBurst(q uint16, pkts []*Mbuf) int {
	defer runtime.KeepAlive(pkts) // passed to C as an integer (see mbufs)
	if len(pkts) == 0 {
		return 0
	}
	return int(C.mr_tx_burst(C.uint16_t(p), C.uint16_t(q), mbufs(pkts), C.uint16_t(len(pkts))))
}

// TxBurstFree is TxBurst that frees what the queue refused, in the same
// cgo call; it returns how many were sent.
func (p PortID) TxBurstFree(q uint16, pkts []*Mbuf) int {
	defer runtime.KeepAlive(pkts) // passed to C as an integer (see mbufs)
	if len(pkts) == 0 {
		return 0
	}
	return int(C.mr_tx_burst_free(C.uint16_t(p), C.uint16_t(q), mbufs(pkts), C.uint16_t(len(pkts))))
}
