package rocev2

// IP traffic class of RoCEv2 packets, for backends that build the IPv4
// header themselves (DPDK, pcap writers). Of it, TxMeta carries only the
// ECN half (ECT, set by NextPacket from the packet; the DSCP is the
// backend's setting): RoCEv2 NICs send RDMA traffic ECN-capable
// (ECT(0)) so that congested switches mark it CE instead of dropping it,
// which is what DCQCN reacts to, and send CNPs not ECN-capable in their own
// DSCP, so that they are not themselves marked (ConnectX defaults: CNP_DSCP
// 48; RDMA traffic in the class the operator configures, commonly DSCP 26).
// DSCP and ECN are masked in the ICRC, so switches may rewrite them.
const (
	DSCPData = 26 // AF31, the usual RoCE traffic class
	DSCPCNP  = 48 // ConnectX CNP_DSCP default

	ECNNotECT = 0
	ECNECT1   = 1
	ECNECT0   = 2
	ECNCE     = 3
)

// TrafficClass returns the DSCP and ECN codepoint a RoCEv2 NIC puts in the
// IPv4 header of the UDP payload pkt: CNPs in DSCPCNP and not ECN-capable,
// everything else in DSCPData and ECT(0).
func TrafficClass(pkt []byte) (dscp, ecn uint8) {
	if len(pkt) > 0 && Opcode(pkt[0]) == OpCNP {
		return DSCPCNP, ECNNotECT
	}
	return DSCPData, ECNECT0
}

// ecnCapable says whether pkt leaves ECN-capable (verbs.TxMeta.ECT): the
// ECN half of TrafficClass, so that the UDP and DPDK backends, which take
// ECT from TxMeta, send what a RoCEv2 NIC sends and a CE-marking fabric
// marks the data instead of dropping it (DCQCN reacts to the marks). CNPs
// stay Not-ECT: a CE mark on a CNP would only ask for a CNP about a CNP.
func ecnCapable(pkt []byte) bool {
	_, ecn := TrafficClass(pkt)
	return ecn == ECNECT0
}
