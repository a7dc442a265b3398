package metaroce

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// Fuzz targets. Run one with
//
//	go test -run '^$' -fuzz '^FuzzHeaderDecode$' -fuzztime 20s ./metaroce/
//
// or all of them with scripts/fuzz-all.sh. Inputs that fail are saved
// under testdata/fuzz/ and replayed by every plain `go test`.

// The decoder targets assert that a decoder never panics and that whatever
// it accepts re-encodes to exactly the bytes it read: the wire format has one
// canonical encoding per value (reserved bits zero, no slack).

func FuzzHeaderDecode(f *testing.F) {
	for _, h := range []Header{
		wtHeader(),
		{Opcode: OpNop, Flags: FlagAckReq, DstConn: 2, SrcConn: 1, Incarnation: 11, Path: 3, PathGen: 1, PSN: 5, Timestamp: 1000000},
		{Opcode: OpConnect, SrcConn: 1, Incarnation: 1},
		{Opcode: OpReset},
	} {
		b := make([]byte, HeaderLen)
		h.Put(b)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add(make([]byte, HeaderLen))
	f.Fuzz(func(t *testing.T, data []byte) {
		var h Header
		if h.Decode(data) != nil {
			return
		}
		require.GreaterOrEqual(t, len(data), HeaderLen)
		require.True(t, validOpcode(h.Opcode))
		require.Zero(t, h.Flags&^flagsKnown)
		out := make([]byte, HeaderLen)
		h.Put(out)
		require.Equal(t, data[:HeaderLen], out)
	})
}

func FuzzMsgHeaderDecode(f *testing.F) {
	for _, fm := range msgForms {
		m := formMsg(fm)
		b := make([]byte, fm.len+int(m.PayloadLen))
		m.Put(fm.op, fm.f, b)
		f.Add(byte(fm.op), uint16(fm.f), b)
		f.Add(byte(fm.op), uint16(fm.f), b[:fm.len-1])
	}
	f.Fuzz(func(t *testing.T, op byte, flags uint16, data []byte) {
		o, fl := Opcode(op), HeaderFlags(flags)&(FlagSolo|FlagStatus)
		var m MsgHeader
		n, err := m.Decode(o, fl, data)
		if err != nil {
			return
		}
		require.Equal(t, MsgExtLen(o, fl), n)
		require.Equal(t, len(data)-n, int(m.PayloadLen))
		require.LessOrEqual(t, uint64(m.Offset)+uint64(m.PayloadLen), uint64(m.MsgLen))
		out := make([]byte, n)
		require.Equal(t, n, m.Put(o, fl, out))
		require.Equal(t, data[:n], out)
	})
}

func FuzzAckDecode(f *testing.F) {
	for _, blocks := range []string{"", "f", "c", "fcf", "ccc"} {
		f.Add(wtAckBody(blocks))
	}
	f.Add([]byte{1, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 1})
	f.Add([]byte{1, 0, 0, 0, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		// A single block decodes from its flags' length, and encoding it
		// again gives the same block (a full block with a zero bitmap
		// comes back compact).
		var a AckBlock
		if l, err := a.Decode(data); err == nil {
			require.True(t, l == AckBlockLen || l == AckBlockCompactLen)
			require.LessOrEqual(t, l, len(data))
			out := make([]byte, a.Len())
			a.Put(out)
			var b AckBlock
			_, err := b.Decode(out)
			require.NoError(t, err)
			require.Equal(t, a, b)
			if a.Len() == l {
				require.Equal(t, data[:l], out)
			}
		}
		n, err := DecodeAckPrefix(data)
		if err != nil {
			return
		}
		require.LessOrEqual(t, n, MaxAckBlocks)
		// Every announced block decodes and they fill the body exactly.
		o := AckPrefixLen
		for i := 0; i < n; i++ {
			var b AckBlock
			l, err := b.Decode(data[o:])
			require.NoError(t, err)
			o += l
		}
		require.Equal(t, len(data), o)
	})
}

func FuzzNakDecode(f *testing.F) {
	for _, st := range []verbs.Status{verbs.StatusLocalLengthError, verbs.StatusRemoteAccessError, verbs.StatusRemoteOpError,
		verbs.StatusRemoteInvalidReq, verbs.StatusReceiverNotReady} {
		n := NakBody{Path: 1, PathGen: 2, PSN: 3, Stream: 4, Status: st, MsgSeq: 5, RNRWait: 6}
		b := make([]byte, NakLen)
		n.Put(b)
		f.Add(b)
	}
	f.Add(make([]byte, NakLen))
	f.Fuzz(func(t *testing.T, data []byte) {
		var n NakBody
		if n.Decode(data) != nil {
			return
		}
		require.Len(t, data, NakLen)
		require.True(t, nakable(n.Status))
		out := make([]byte, NakLen)
		n.Put(out)
		require.Equal(t, data, out)
	})
}

func FuzzConnectDecode(f *testing.F) {
	for _, c := range []ConnectBody{
		{Node: 1, Paths: 8, MTU: 4096, Streams: 1024, Planes: 1},
		{Paths: 1, MTU: 256, Streams: 1, Planes: 1},
		{Node: ^NodeID(0), Paths: 256, MTU: 9000, Streams: 65535, Planes: 16, Token: Token{15: 0xff}},
	} {
		b := make([]byte, ConnectLen)
		c.Put(b)
		f.Add(b)
	}
	f.Add(make([]byte, ConnectLen))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c ConnectBody
		if c.Decode(data) != nil {
			return
		}
		require.Len(t, data, ConnectLen)
		require.True(t, c.Paths >= 1 && c.Paths <= MaxPaths, "paths %d", c.Paths)
		require.True(t, c.MTU >= MinMTU && c.MTU <= MaxMTU, "mtu %d", c.MTU)
		require.True(t, c.Planes >= 1 && c.Planes <= MaxPlanes, "planes %d", c.Planes)
		require.NotZero(t, c.Streams)
		out := make([]byte, ConnectLen)
		c.Put(out)
		require.Equal(t, data, out)
	})
}

func FuzzCheckCRC(f *testing.F) {
	h := Header{Opcode: OpNop, Flags: FlagAckReq, DstConn: 2, SrcConn: 1, Incarnation: 11, Path: 3, PathGen: 1, PSN: 5, Timestamp: 1000000}
	nop := make([]byte, HeaderLen+CRCLen)
	h.Put(nop)
	SealCRC(nop, HeaderLen)
	f.Add(nop, uint16(0))
	f.Add(append([]byte("123456789"), 0xE3, 0x06, 0x92, 0x83), uint16(7))
	f.Add(make([]byte, HeaderLen+CRCLen), uint16(300))
	f.Fuzz(func(t *testing.T, data []byte, flip uint16) {
		body, err := CheckCRC(data)
		if err == nil {
			// What checks is a body plus its own CRC: resealing the body
			// reproduces the packet.
			require.Len(t, body, len(data)-CRCLen)
			re := append(bytes.Clone(body), 0, 0, 0, 0)
			require.Equal(t, len(data), SealCRC(re, len(body)))
			require.Equal(t, data, re)
		} else if len(data) >= HeaderLen+CRCLen {
			require.ErrorIs(t, err, ErrCRC)
		} else {
			require.ErrorIs(t, err, ErrShort)
		}
		if len(data) < HeaderLen {
			return
		}
		// Sealing any body yields a packet that checks, and flipping any
		// one bit of it (trailer included) is detected.
		p := append(bytes.Clone(data), 0, 0, 0, 0)
		n := SealCRC(p, len(data))
		got, err := CheckCRC(p[:n])
		require.NoError(t, err)
		require.Equal(t, data, got)
		bit := int(flip) % (8 * n)
		p[bit/8] ^= 1 << (bit % 8)
		_, err = CheckCRC(p[:n])
		require.ErrorIs(t, err, ErrCRC, "bit %d of %d bytes", bit, n)
	})
}

// --- FuzzEndpointReceive ---------------------------------------------------

// fzGuard is the number of bytes before and after every registered region
// in an arena. Regions are registered as arena[off:off+n] without capping
// their capacity, so a write past a region's end (through its capacity)
// would land in the next guard and be seen.
const fzGuard = 64

const (
	fzGuardByte  = 0xA5
	fzStream     = StreamID(0)
	fzIncA       = Incarnation(11) // newWirePair's incarnation of A
	fzReadLen    = 1000            // B's READ from A's source into D
	fzRecvPosted = 2048            // bytes of R covered by B's posted receives
)

// fzArena is one endpoint's memory: every registered region lives in it,
// separated by guards, so "memory outside any region" is concrete.
type fzArena struct {
	mem     []byte
	regions [][2]int // [off, end) of each region
}

func (a *fzArena) add(n int, fill func(i int) byte) {
	off := len(a.mem) + fzGuard
	for i := 0; i < fzGuard; i++ {
		a.mem = append(a.mem, fzGuardByte)
	}
	for i := 0; i < n; i++ {
		a.mem = append(a.mem, fill(i))
	}
	a.regions = append(a.regions, [2]int{off, off + n})
}

// finish appends the last guard and returns the regions' slices.
func (a *fzArena) finish() [][]byte {
	for i := 0; i < fzGuard; i++ {
		a.mem = append(a.mem, fzGuardByte)
	}
	out := make([][]byte, len(a.regions))
	for i, r := range a.regions {
		out[i] = a.mem[r[0]:r[1]] // capacity runs to the arena's end on purpose
	}
	return out
}

// checkGuards fails if any byte outside the regions changed.
func (a *fzArena) checkGuards(t *testing.T, side string) {
	t.Helper()
	prev := 0
	for _, r := range append(a.regions, [2]int{len(a.mem), len(a.mem)}) {
		for i := prev; i < r[0]; i++ {
			if a.mem[i] != fzGuardByte {
				t.Fatalf("%s: byte %d outside every registered region changed to %#x", side, i, a.mem[i])
			}
		}
		prev = r[1]
	}
}

// fzEnv is an established connection from A to B with queue pairs on
// stream 0 and, on B (the endpoint under fuzz):
//
//	T  target region: local write, remote write and read, patterned
//	N  no remote access (local write only), patterned: must never change
//	R  receive region: receives posted on [0,1024) and [1024,2048); the
//	   rest is never posted and must never change
//	D  READ destination: B has a READ of fzReadLen bytes from A's S
//	   posted; its READ_REQ was sent and lost, so B has a sequenced packet
//	   outstanding (ACKs and NAKs aimed at B act on real state); D beyond
//	   the READ must never change
//
// and on A: S (source, remote read only) and AD (A's READ destination).
type fzEnv struct {
	w             *wirePair
	ca, cb        *Conn
	qa, qb        *QueuePair
	cqa, cqb      *verbs.CompletionQueue
	arenaA        fzArena
	arenaB        fzArena
	mrS, mrAD     *verbs.MemoryRegion
	mrT, mrN, mrR *verbs.MemoryRegion
	mrD           *verbs.MemoryRegion
	origN, origS  []byte
	origR, origD  []byte
	origAD        []byte
	readPath      verbs.PathID // path of B's lost READ_REQ
	readPSN       PSN          // and its PSN (the path's first)
}

func fzConfig() Config {
	return Config{Paths: 2, MTU: 256, Streams: 4, RNRBackoff: 20000, KeepaliveInterval: 2e6}
}

func fzNewEnv(t testing.TB) *fzEnv { return fzNewEnvCfg(t, fzConfig()) }

func fzNewEnvCfg(t testing.TB, cfg Config) *fzEnv {
	e := &fzEnv{w: newWirePair(t, cfg)}
	a, b := e.w.ep[0], e.w.ep[1]
	var err error
	e.ca, err = a.Connect(e.w.now, 1)
	require.NoError(t, err)
	// Until B has A's proof too (token.go): before it, B's sends wait
	// for it (amplification.go).
	for i := 0; i < 100 && (e.cb == nil || !e.ca.Established() || e.cb.halfOpen.in); i++ {
		if e.cb == nil {
			e.cb, _ = b.Accept()
		}
		if !e.w.step() {
			break
		}
	}
	if e.cb == nil {
		e.cb, _ = b.Accept()
	}
	require.NotNil(t, e.cb, "B never accepted")
	require.True(t, e.ca.Established(), "A never established")

	pda, pdb := a.AllocPD(), b.AllocPD()
	e.cqa, e.cqb = verbs.NewCompletionQueue(64), verbs.NewCompletionQueue(64)
	e.qa, err = e.ca.CreateQP(fzStream, verbs.QPAttr{PD: pda, SendCQ: e.cqa, RecvCQ: e.cqa})
	require.NoError(t, err)
	e.qb, err = e.cb.CreateQP(fzStream, verbs.QPAttr{PD: pdb, SendCQ: e.cqb, RecvCQ: e.cqb})
	require.NoError(t, err)

	e.arenaA.add(4096, func(i int) byte { return byte(i*11 + 9) }) // S
	e.arenaA.add(2048, func(int) byte { return 0xAD })             // AD
	ra := e.arenaA.finish()
	e.arenaB.add(2048, func(i int) byte { return byte(i*7 + 1) }) // T
	e.arenaB.add(1024, func(i int) byte { return byte(i*5 + 3) }) // N
	e.arenaB.add(4096, func(int) byte { return 0xCC })            // R
	e.arenaB.add(2048, func(int) byte { return 0xDD })            // D
	rb := e.arenaB.finish()

	reg := func(pd *verbs.ProtectionDomain, buf []byte, acc verbs.Access) *verbs.MemoryRegion {
		m, err := pd.RegisterMR(buf, acc)
		require.NoError(t, err)
		return m
	}
	e.mrS = reg(pda, ra[0], verbs.AccessRemoteRead)
	e.mrAD = reg(pda, ra[1], verbs.AccessLocalWrite)
	e.mrT = reg(pdb, rb[0], verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	e.mrN = reg(pdb, rb[1], verbs.AccessLocalWrite)
	e.mrR = reg(pdb, rb[2], verbs.AccessLocalWrite)
	e.mrD = reg(pdb, rb[3], verbs.AccessLocalWrite)
	e.origS, e.origAD = bytes.Clone(ra[0]), bytes.Clone(ra[1])
	e.origN, e.origR, e.origD = bytes.Clone(rb[1]), bytes.Clone(rb[2]), bytes.Clone(rb[3])

	now := e.w.now
	require.NoError(t, e.qb.PostRecv(now, verbs.RecvWR{ID: 100, Local: e.mrR.SGE(0, 1024)}))
	require.NoError(t, e.qb.PostRecv(now, verbs.RecvWR{ID: 101, Local: e.mrR.SGE(1024, 1024)}))
	require.NoError(t, e.qb.PostSend(now, verbs.SendWR{ID: 200, Opcode: verbs.WRRead, Local: e.mrD.SGE(0, fzReadLen),
		RemoteAddr: e.mrS.Addr(), RKey: e.mrS.RKey()}))
	// The READ_REQ goes out and is lost: B resends it after its RTO.
	for {
		meta, ok := b.NextPacket(now, e.w.buf)
		if !ok {
			break
		}
		var h Header
		require.NoError(t, h.decode(e.w.buf[:meta.Len], flagsKnown|flagsSeal))
		if h.Opcode == OpReadReq {
			e.readPath, e.readPSN = h.Path, h.PSN
		}
	}
	return e
}

// postTraffic is the normal exchange the seed corpus is captured from:
// every data opcode, and refusals (no remote access, receiver not ready).
func (e *fzEnv) postTraffic(t testing.TB) {
	now := e.w.now
	for _, wr := range []verbs.SendWR{
		{ID: 1, Opcode: verbs.WRWrite, Local: e.mrS.SGE(0, 700), RemoteAddr: e.mrT.Addr() + 100, RKey: e.mrT.RKey()},
		{ID: 2, Opcode: verbs.WRSendImm, Local: e.mrS.SGE(700, 300), Imm: 42},
		{ID: 3, Opcode: verbs.WRRead, Local: e.mrAD.SGE(0, 600), RemoteAddr: e.mrT.Addr(), RKey: e.mrT.RKey()},
		{ID: 4, Opcode: verbs.WRWriteImm, Local: e.mrS.SGE(0, 200), RemoteAddr: e.mrT.Addr() + 1500, RKey: e.mrT.RKey(), Imm: 7},
		{ID: 5, Opcode: verbs.WRWrite, Local: e.mrS.SGE(0, 100), RemoteAddr: e.mrN.Addr(), RKey: e.mrN.RKey()},
		{ID: 6, Opcode: verbs.WRWrite, Local: e.mrS.SGE(0, 0), RemoteAddr: e.mrT.Addr(), RKey: e.mrT.RKey()},
		{ID: 7, Opcode: verbs.WRSend, Local: e.mrS.SGE(0, 100)}, // no receive left: RNR, then RNR retry exceeded
	} {
		require.NoError(t, e.qa.PostSend(now, wr))
	}
}

// run steps the pair a bounded number of times.
func (e *fzEnv) run(steps int, span verbs.Time) {
	end := e.w.now + span
	for i := 0; i < steps && e.w.now < end; i++ {
		if !e.w.step() {
			return
		}
	}
}

// check asserts the memory-safety invariants.
func (e *fzEnv) check(t *testing.T) {
	t.Helper()
	e.arenaA.checkGuards(t, "A")
	e.arenaB.checkGuards(t, "B")
	require.Equal(t, e.origN, e.mrN.Bytes(), "B's region without remote access changed")
	require.Equal(t, e.origR[fzRecvPosted:], e.mrR.Bytes()[fzRecvPosted:], "B's memory outside its posted receives changed")
	require.Equal(t, e.origD[fzReadLen:], e.mrD.Bytes()[fzReadLen:], "B's READ destination changed beyond the READ")
	require.Equal(t, e.origS, e.mrS.Bytes(), "A's read-only source changed")
	require.Equal(t, e.origAD, e.mrAD.Bytes(), "A's READ destination changed though A posted no READ")
}

// fzCapture runs the normal exchange and returns every packet either side
// sent, in order (the connection handshake is not included).
func fzCapture(t testing.TB) [][]byte {
	e := fzNewEnv(t)
	var pkts [][]byte
	e.w.drop = func(from int, pkt []byte) bool {
		pkts = append(pkts, bytes.Clone(pkt))
		return false
	}
	e.postTraffic(t)
	wcs := make([]verbs.WorkCompletion, 16)
	got := 0
	for i := 0; i < 100000 && got < 10; i++ {
		if !e.w.step() {
			break
		}
		got += e.cqa.Poll(wcs) + e.cqb.Poll(wcs)
	}
	// A: 7 sends; B: its READ and two receives.
	require.Equal(t, 10, got, "the seed exchange did not complete")
	return pkts
}

// fzPatch points a packet at B's connection: dst_conn, src_conn and
// incarnation of the live connection, this version.
func (e *fzEnv) fzPatch(p []byte) {
	p[0] = WireVersion
	binary.BigEndian.PutUint32(p[4:], uint32(e.cb.LocalID()))
	binary.BigEndian.PutUint32(p[8:], uint32(e.ca.LocalID()))
	binary.BigEndian.PutUint32(p[12:], uint32(fzIncA))
}

func TestFuzzEnvSeedExchange(t *testing.T) {
	pkts := fzCapture(t)
	ops := map[Opcode]int{}
	for _, p := range pkts {
		var h Header
		_, err := CheckCRC(p)
		require.NoError(t, err)
		require.NoError(t, h.Decode(p))
		ops[h.Opcode]++
	}
	for _, op := range []Opcode{OpWrite, OpWriteImm, OpSendImm, OpSend, OpReadReq, OpReadResp, OpAck, OpNak, OpNop} {
		require.NotZero(t, ops[op], "no %v in the seed exchange", op)
	}

	// B's READ_REQ is really outstanding: a NAK of it fails the READ.
	e := fzNewEnv(t)
	p := make([]byte, HeaderLen+NakLen+CRCLen)
	h := Header{Opcode: OpNak, DstConn: e.cb.LocalID(), SrcConn: e.ca.LocalID(), Incarnation: fzIncA, Path: e.readPath}
	h.Put(p)
	nb := NakBody{Path: e.readPath, PSN: e.readPSN, Stream: fzStream, Status: verbs.StatusRemoteAccessError}
	nb.Put(p[HeaderLen:])
	// Without the proof of B's token it is refused and counted ...
	e.w.ep[1].Receive(e.w.now, p[:SealCRC(p, HeaderLen+NakLen)], verbs.RxMeta{Peer: 0})
	require.Zero(t, e.cb.Counters().NaksReceived)
	require.Equal(t, uint64(1), e.cb.Counters().BadTags)
	// ... with it, acted on.
	putTag(p, HeaderLen+NakLen, &e.cb.tokLocal)
	e.w.ep[1].Receive(e.w.now, p[:SealCRC(p, HeaderLen+NakLen)], verbs.RxMeta{Peer: 0})
	require.Equal(t, uint64(1), e.cb.Counters().NaksReceived)
	e.run(100, 20e6)
	wcs := make([]verbs.WorkCompletion, 4)
	require.Equal(t, 1, e.cqb.Poll(wcs))
	require.Equal(t, verbs.StatusRemoteAccessError, wcs[0].Status)
	require.Equal(t, verbs.WCRead, wcs[0].Opcode)

	// The environment is deterministic, so a captured packet replayed as
	// is into a fresh one reaches placement: the raw seeds go deep.
	for _, p := range pkts {
		var h Header
		require.NoError(t, h.Decode(p))
		if h.Opcode != OpWrite {
			continue
		}
		e := fzNewEnv(t)
		e.w.ep[1].Receive(e.w.now, p, verbs.RxMeta{Peer: 0})
		require.Equal(t, uint64(fzPayloadLen(p)), e.cb.Counters().PayloadPlaced)
		require.NotZero(t, e.cb.Counters().PayloadPlaced)
		return
	}
	t.Fatal("no WRITE captured")
}

// fzPayloadLen is the payload length a data packet's extension announces.
func fzPayloadLen(p []byte) int {
	var h Header
	var m MsgHeader
	if h.Decode(p) != nil {
		return -1
	}
	if _, err := m.Decode(h.Opcode, h.Flags, p[HeaderLen:len(p)-CRCLen]); err != nil {
		return -1
	}
	return int(m.PayloadLen)
}

func FuzzEndpointReceive(f *testing.F) {
	for _, p := range fzCapture(f) {
		f.Add(p)
	}
	// Control packets aimed at the connection, which the exchange lacks.
	env := fzNewEnv(f)
	for _, op := range []Opcode{OpKeepalive, OpClose, OpCloseAck, OpReset, OpAccept, OpConnect} {
		p := make([]byte, HeaderLen+ConnectLen+CRCLen)
		h := Header{Opcode: op, DstConn: env.cb.LocalID(), SrcConn: env.ca.LocalID(), Incarnation: fzIncA}
		h.Put(p)
		n := HeaderLen
		if op == OpConnect || op == OpAccept {
			cb := ConnectBody{Node: 1, Paths: 2, MTU: 256, Streams: 4, Planes: 1}
			cb.Put(p[n:])
			n += ConnectLen
		}
		if op.tagged() {
			putTag(p, n, &env.cb.tokLocal) // as the peer would: the seed goes past the proof
		}
		n = SealCRC(p, n)
		f.Add(p[:n])
	}
	// NAKs of B's outstanding READ_REQ, with every refusal status.
	for _, st := range []verbs.Status{verbs.StatusRemoteAccessError, verbs.StatusReceiverNotReady, verbs.StatusLocalLengthError,
		verbs.StatusRemoteInvalidReq, verbs.StatusRemoteOpError} {
		p := make([]byte, HeaderLen+NakLen+CRCLen)
		h := Header{Opcode: OpNak, DstConn: env.cb.LocalID(), SrcConn: env.ca.LocalID(), Incarnation: fzIncA, Path: env.readPath}
		h.Put(p)
		nb := NakBody{Path: env.readPath, PSN: env.readPSN, Stream: fzStream, Status: st}
		nb.Put(p[HeaderLen:])
		putTag(p, HeaderLen+NakLen, &env.cb.tokLocal)
		f.Add(p[:SealCRC(p, HeaderLen+NakLen)])
	}
	for _, p := range fzGenProofSeeds(f, env) {
		f.Add(p)
	}
	f.Add([]byte{})
	f.Add(make([]byte, HeaderLen+CRCLen))

	f.Fuzz(func(t *testing.T, data []byte) {
		e := fzNewEnv(t)
		b := e.w.ep[1]
		rx := verbs.RxMeta{Peer: 0}
		// 1. As received: most mutations fail the CRC.
		b.Receive(e.w.now, data, rx)
		if len(data) >= HeaderLen+CRCLen {
			// 2. With the CRC fixed, so the header and extension decoders
			// and the connection lookup see it.
			p := bytes.Clone(data)
			SealCRC(p, len(p)-CRCLen)
			b.Receive(e.w.now, p, verbs.RxMeta{Peer: 0, CE: true})
			// 3. Addressed to the live connection as its peer, so the
			// connection's state machine, scoreboard and placement see it.
			e.fzPatch(p)
			SealCRC(p, len(p)-CRCLen)
			b.Receive(e.w.now, p, rx)
			// 4. With its proof of B's token fixed too (token.go), as the
			// peer would send it: unsequenced packets reach their
			// handlers, which a blind forger's (3) must not.
			// Sequenced ones with FlagGenProof get the right proof of
			// their generation (genproof.go), so that adopting a newer
			// generation is reached too.
			if op := Opcode(p[1]); op.tagged() {
				putTag(p, len(p)-CRCLen, &e.cb.tokLocal)
				SealCRC(p, len(p)-CRCLen)
				b.Receive(e.w.now, p, rx)
			} else if op.Sequenced() && HeaderFlags(binary.BigEndian.Uint16(p[2:]))&FlagGenProof != 0 {
				binary.BigEndian.PutUint64(p[tagOff:], genProofTag(p, &e.cb.tokLocal))
				SealCRC(p, len(p)-CRCLen)
				b.Receive(e.w.now, p, rx)
			}
		}
		e.check(t)
		// Let both sides react (NAKs, ACKs, READ responses, resends).
		e.run(300, 20e6)
		e.check(t)
	})
}

// fzGenProofSeeds are packets with FlagGenProof (genproof.go) for env's
// live connection, which the seed exchange (generation 0 only) lacks: a
// NOP and each captured data packet moved to the first PSN of the next
// generation of its path, with the right proof, and with a wrong one; a
// NOP of the current generation with the flag; and a KEEPALIVE with it
// (refused: the flag is the sequenced packets').
func fzGenProofSeeds(tb testing.TB, env *fzEnv) [][]byte {
	var out [][]byte
	seq := func(base []byte, op Opcode, path verbs.PathID, gen uint16, psn PSN, wrong bool) {
		p := bytes.Clone(base)
		h := Header{Opcode: op, Flags: FlagAckReq | FlagGenProof, DstConn: env.cb.LocalID(), SrcConn: env.ca.LocalID(),
			Incarnation: fzIncA, Path: path, PathGen: gen, PSN: psn}
		h.Put(p)
		proof := genProofTag(p, &env.cb.tokLocal)
		if wrong {
			proof ^= 1
		}
		binary.BigEndian.PutUint64(p[tagOff:], proof)
		out = append(out, p[:SealCRC(p, len(p)-CRCLen)])
	}
	nop := make([]byte, HeaderLen+CRCLen)
	for path := verbs.PathID(0); int(path) < fzConfig().Paths; path++ {
		isn := isnKey(&env.cb.tokRemote, &env.cb.tokLocal, int(path))
		seq(nop, OpNop, path, 1, initialPSN(isn, 1), false)
		seq(nop, OpNop, path, 1, initialPSN(isn, 1), true)
		seq(nop, OpNop, path, 0, initialPSN(isn, 0), false)
	}
	n := 0
	for _, p := range fzCapture(tb) {
		op := Opcode(p[1])
		if !op.CarriesMsg() || n >= 6 {
			continue
		}
		n++
		path := verbs.PathID(binary.BigEndian.Uint16(p[16:]))
		isn := isnKey(&env.cb.tokRemote, &env.cb.tokLocal, int(path))
		seq(p, op, path, 1, initialPSN(isn, 1), false)
	}
	ka := make([]byte, HeaderLen+CRCLen)
	h := Header{Opcode: OpKeepalive, Flags: FlagGenProof, DstConn: env.cb.LocalID(), SrcConn: env.ca.LocalID(), Incarnation: fzIncA}
	h.Put(ka)
	putTag(ka, HeaderLen, &env.cb.tokLocal)
	out = append(out, ka[:SealCRC(ka, HeaderLen)])
	return out
}

// The FlagGenProof seeds go where they are meant to: into a fresh
// environment, the proven ones of the next generation are adopted (the
// data ones placed as well, or refused by placement), the wrong ones
// counted as bad proofs, the KEEPALIVE refused as malformed.
func TestFuzzGenProofSeeds(t *testing.T) {
	seeds := fzGenProofSeeds(t, fzNewEnv(t))
	adopted, bad, malformed := 0, 0, 0
	for _, p := range seeds {
		e := fzNewEnv(t)
		e.w.ep[1].Receive(e.w.now, p, verbs.RxMeta{Peer: 0})
		for i := range e.cb.rx {
			if e.cb.rx[i].gen == 1 {
				adopted++
			}
		}
		bad += int(e.cb.c.BadTags)
		malformed += int(e.w.ep[1].c.Malformed)
		e.check(t)
	}
	paths := fzConfig().Paths
	require.GreaterOrEqual(t, adopted, paths+1, "the proven seeds of the next generation were not adopted")
	require.Equal(t, paths, bad, "the seeds with a wrong proof")
	require.Equal(t, 1, malformed, "the KEEPALIVE with FlagGenProof")
	t.Logf("%d seeds: %d adopted a generation, %d bad proofs, %d malformed", len(seeds), adopted, bad, malformed)
}
