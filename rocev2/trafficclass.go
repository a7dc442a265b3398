package rocev2

// IP traffic class of RoCEv2 packets, for backends that build the IPv4
// header themselves (DPDK, pcap writers). TxMeta does not carry it because
// it follows from the packet: RoCEv2 NICs send RDMA traffic ECN-capable
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
