package fabricscript

import (
	"bytes"
	"context"
	enc "encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/test/internal/binary"
	"github.com/metaroce/metaroce/test/internal/testenv"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// inNetns runs fn on a thread moved into network namespace ns; sockets fn
// creates belong to ns for good and may be used from any goroutine. The
// thread is never moved back: it ends with the goroutine (LockOSThread
// without Unlock).
func inNetns(t *testing.T, ns string, fn func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		fn()
		done <- nil
	}()
	require.NoError(t, <-done)
}

// chunk is what the forger knows of one WRITE packet from A to B.
type chunk struct {
	h metaroce.Header
	m metaroce.MsgHeader
}

// TestPerfVerifyCatchesForgedPackets: real, well-formed packets forged by
// an outsider on the path (built with the metaroce package's header
// encoders and CRC from the ids of a sniffed packet, sent from host A's
// address into host B's) get bytes wrong that --verify then reports,
// with the message and offset, and perf exits non-zero.
//
// The forger sniffs the first WRITE packet arriving at hB0, then sends a
// copy of it with garbage payload under a PSN of the same path that the
// sender will only use later: B takes it as that PSN (its chunk was placed
// already, so exactly-once placement does not place it again), and the
// real packet with that PSN, when it comes, as a duplicate. So the real
// chunk is never placed and its message keeps what its slot held: the
// report names that message's chunk (or, without exactly-once placement,
// the first chunk, overwritten). Every message has its own slot
// (-n <= -t), so no later message hides either.
func TestPerfVerifyCatchesForgedPackets(t *testing.T) {
	testenv.Root(t, "network namespaces, veths, packet sockets")
	for _, tool := range []string{"ip", "nft", "tc", "bash"} {
		testenv.Tool(t, tool, "scripts/install-deps.sh installs iproute2 and nftables")
	}
	bin := binary.Build(t)
	f := fab{t: t, prefix: fmt.Sprintf("mrfg%d-", os.Getpid()%100000)}
	t.Cleanup(func() {
		cmd := exec.Command("bash", script, "down")
		cmd.Env = append(os.Environ(), "MR_FABRIC_PREFIX="+f.prefix)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("netns-fabric.sh down: %v\n%s", err, out)
		}
	})
	f.script("up", "--spines", strconv.Itoa(spines))
	hosts := f.prefix + "hosts"

	var sniff, tx int
	inNetns(t, hosts, func() {
		var err error
		// IP packets as they arrive on hB0, before the stack sees them.
		sniff, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IP)))
		require.NoError(t, err)
		// Asked on this thread (netlink, in the hosts namespace): /sys
		// shows the namespace it was mounted in.
		ifc, err := net.InterfaceByName("hB0")
		require.NoError(t, err)
		require.NoError(t, unix.Bind(sniff, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifc.Index}))
		require.NoError(t, unix.SetsockoptTimeval(sniff, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000}))
		// Room for every packet of the run: the forger must see the real
		// packet whose PSN it took (root may exceed rmem_max).
		require.NoError(t, unix.SetsockoptInt(sniff, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 256<<20))
		// The forger's datagrams: from host A's address (the only thing
		// the UDP backend knows its peer by), routed into the fabric.
		tx, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		require.NoError(t, err)
		require.NoError(t, unix.Bind(tx, &unix.SockaddrInet4{Addr: [4]byte{10, 1, 0, 2}}))
	})
	t.Cleanup(func() { unix.Close(sniff); unix.Close(tx) })

	// PSNs ahead on the sniffed path: ~60 x 32 paths = ~1,900 packets
	// later (the forger has milliseconds to get there first), and well
	// within what the path carries in the run (~19,000 / 32).
	const ahead = 60
	type result struct {
		first, stolen chunk
		found         bool
		err           error
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	forged := make(chan result, 1)
	go func() {
		var r result
		buf := make([]byte, 65536)
		sent := false
		var fake []byte
		for ctx.Err() == nil {
			n, _, err := unix.Recvfrom(sniff, buf, 0)
			if err != nil {
				continue // the receive timeout: look at ctx again
			}
			c, ok := parseWrite(buf[:n])
			if !ok || (fake != nil && bytes.Contains(buf[:n], fake)) {
				continue // not a WRITE chunk, or our own forgery crossing hB0
			}
			if !sent {
				r.first = c
				pkt := forge(c, ahead)
				fake = pkt
				if err := unix.Sendto(tx, pkt, 0, &unix.SockaddrInet4{Addr: [4]byte{10, 2, 0, 2}, Port: 4794}); err != nil {
					r.err = err
					break
				}
				sent = true
				continue
			}
			if c.h.Path == r.first.h.Path && c.h.PathGen == r.first.h.PathGen && c.h.PSN == r.first.h.PSN+ahead {
				r.stolen, r.found = c, true
				break
			}
		}
		forged <- r
	}()

	out, err := f.verifyRun(ctx, bin, 400)
	cancel()
	r := <-forged
	require.NoError(t, r.err, "sending the forged packet")
	require.NotZero(t, r.first.h.DstConn, "no WRITE packet sniffed at hB0:\n%s", out)
	t.Logf("forged: path %d gen %d PSN %d (%d ahead) with message %d offset %d's header, garbage payload; the real PSN %d: found %v, message %d offset %d len %d",
		r.first.h.Path, r.first.h.PathGen, r.first.h.PSN+ahead, ahead, r.first.m.MsgSeq, r.first.m.Offset,
		r.first.h.PSN+ahead, r.found, r.stolen.m.MsgSeq, r.stolen.m.Offset, r.stolen.m.PayloadLen)
	ee, ok := err.(*exec.ExitError)
	require.True(t, ok && ee.ExitCode() != 0, "perf --verify exited %v after forged packets:\n%s", err, out)
	m := verifyRE.FindStringSubmatch(out)
	require.NotNil(t, m, "no verify report:\n%s", out)
	off, _ := strconv.Atoi(m[2])
	t.Logf("perf --verify: %s (exit %d)", m[0], ee.ExitCode())
	// The report names a byte one of the two forged effects got wrong:
	// the forged payload over the first chunk, or the chunk whose PSN
	// the forgery took.
	in := func(c chunk) bool {
		return off >= int(c.m.Offset) && off < int(c.m.Offset)+int(c.m.PayloadLen)
	}
	require.True(t, in(r.first) || (r.found && in(r.stolen)),
		"the wrong offset %d is neither the forged chunk's [%d, +%d) nor the stolen PSN's [%d, +%d)",
		off, r.first.m.Offset, r.first.m.PayloadLen, r.stolen.m.Offset, r.stolen.m.PayloadLen)
}

// forgedMsgAhead is how far ahead of the sniffed message the forgery's
// message sequence is: well inside the responder's window (MsgWindow)
// and the run's 400 messages, late enough not to have arrived yet.
const forgedMsgAhead = 300

var verifyRE = regexp.MustCompile(`verify: QP (\d+) message \d+: first wrong byte at offset (\d+)`)

// parseWrite reads an IPv4/UDP datagram from host A to B's port 4794
// carrying a metaroce WRITE chunk.
func parseWrite(ip []byte) (chunk, bool) {
	var c chunk
	if len(ip) < 28 || ip[0]>>4 != 4 || ip[9] != unix.IPPROTO_UDP || !bytes.Equal(ip[12:16], []byte{10, 1, 0, 2}) {
		return c, false
	}
	ihl := int(ip[0]&15) * 4
	if len(ip) < ihl+8 || enc.BigEndian.Uint16(ip[ihl+2:]) != 4794 {
		return c, false
	}
	pkt := ip[ihl+8:]
	if c.h.Decode(pkt) != nil || c.h.Opcode != metaroce.OpWrite || len(pkt) < metaroce.HeaderLen+metaroce.CRCLen {
		return c, false
	}
	if _, err := c.m.Decode(c.h.Opcode, c.h.Flags, pkt[metaroce.HeaderLen:len(pkt)-metaroce.CRCLen]); err != nil || c.m.PayloadLen == 0 {
		return c, false
	}
	return c, true
}

// forge builds a metaroce packet from sniffed chunk c: the same ids and
// message header, the PSN ahead of c's on the same path, a garbage
// payload of the same length, and a valid CRC32C.
func forge(c chunk, ahead metaroce.PSN) []byte {
	h := c.h
	h.PSN += ahead
	h.Flags = 0
	// A later message's sequence number, with the sniffed chunk's target:
	// the responder places each chunk of a message once, so a copy that
	// names the sniffed (already placed) chunk itself would be dropped as
	// a duplicate; one that names a message not yet seen is placed.
	c.m.MsgSeq += forgedMsgAhead
	// The full extension (no FlagSolo: the sniffed chunk's offset and
	// length stay as they were).
	el := metaroce.MsgExtLen(metaroce.OpWrite, 0)
	n := metaroce.HeaderLen + el + int(c.m.PayloadLen)
	pkt := make([]byte, n+metaroce.CRCLen)
	h.Put(pkt)
	c.m.Put(metaroce.OpWrite, 0, pkt[metaroce.HeaderLen:])
	for i := metaroce.HeaderLen + el; i < n; i++ {
		pkt[i] = 0xA5
	}
	return pkt[:metaroce.SealCRC(pkt, n)]
}

// verifyRun runs perf write_bw --verify across the fabric with iters
// messages of 64 KiB, each in its own slot (-t iters), and returns the
// client's output and exit error (the server's output appended).
func (f fab) verifyRun(ctx context.Context, bin string, iters int) (string, error) {
	hosts := f.prefix + "hosts"
	srv := exec.CommandContext(ctx, "ip", "netns", "exec", hosts, bin, "perf", "write_bw", "--profile", profile,
		"--wait", "30s", "--progress", "never")
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return "", err
	}
	time.Sleep(300 * time.Millisecond) // the server listens
	cli := exec.CommandContext(ctx, "ip", "netns", "exec", hosts, bin, "perf", "write_bw", "--profile", profile,
		"10.2.0.2", "-n", strconv.Itoa(iters), "-t", strconv.Itoa(iters), "--verify", "--progress", "never")
	out, err := cli.CombinedOutput()
	_ = srv.Wait()
	return string(out) + "\nserver:\n" + srvOut.String(), err
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
