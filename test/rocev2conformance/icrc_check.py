"""Independent ICRC check of a RoCEv2 capture with scapy.contrib.roce.

Usage: /usr/bin/python3 icrc_check.py FILE.pcap

For every frame: it must be UDP to port 4791 with a BTH, and the ICRC in
its last four bytes must equal the one scapy computes from the frame's own
IPv4/UDP/BTH headers and payload. Prints one line per mismatch and a summary
line "checked N packets, M mismatches"; exits 1 on any mismatch.
"""
import sys

from scapy.all import UDP, rdpcap
from scapy.contrib.roce import BTH

bad = 0
n = 0
for i, p in enumerate(rdpcap(sys.argv[1]), 1):
    if UDP not in p or p[UDP].dport != 4791 or BTH not in p:
        print(f"frame {i}: not a RoCEv2 packet")
        bad += 1
        continue
    got = bytes(p[UDP].payload)[-4:]
    want = p[BTH].compute_icrc(None)
    n += 1
    if got != want:
        print(f"frame {i}: ICRC {got.hex()} but scapy computes {want.hex()}")
        bad += 1
print(f"checked {n} packets, {bad} mismatches")
sys.exit(1 if bad else 0)
