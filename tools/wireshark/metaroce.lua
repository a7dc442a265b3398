-- metaroce.lua: Wireshark / tshark dissector for the MetaRoCE wire
-- protocol, version 2 (docs/protocol.md), on UDP port 4794.
--
--   tshark -X lua_script:tools/wireshark/metaroce.lua -r capture.pcap
--   wireshark -X lua_script:tools/wireshark/metaroce.lua capture.pcap
--
-- Another port: Edit > Preferences > Protocols > MetaRoCE (or tshark
-- -o metaroce.udp_port:NNNN), or Decode As. Every field below is named
-- metaroce.<field> for display filters (metaroce.opcode == 0x10, ...).
-- The CRC32C trailer is shown, not verified; so are the sealed modes' tags
-- and MACs (security.mode auth and encrypt, docs/protocol.md §17). A
-- coalesced datagram (§2.1) shows each of its packets in turn.

local p = Proto("metaroce", "MetaRoCE")

local opcodes = {
    [0x01] = "WRITE", [0x02] = "WRITE_IMM", [0x03] = "SEND", [0x04] = "SEND_IMM",
    [0x05] = "READ_REQ", [0x06] = "READ_RESP", [0x07] = "NOP",
    [0x10] = "ACK", [0x11] = "NAK",
    [0x20] = "CONNECT", [0x21] = "ACCEPT", [0x22] = "CLOSE", [0x23] = "CLOSE_ACK",
    [0x24] = "KEEPALIVE", [0x25] = "RESET",
}
local nak_status = { [1] = "RNR", [2] = "REMOTE_ACCESS", [3] = "REMOTE_OP", [4] = "INVALID_REQUEST", [5] = "LENGTH" }

local f = p.fields
f.version     = ProtoField.uint8("metaroce.version", "Version")
f.opcode      = ProtoField.uint8("metaroce.opcode", "Opcode", base.HEX, opcodes)
f.flags       = ProtoField.uint16("metaroce.flags", "Flags", base.HEX)
f.ack_req     = ProtoField.bool("metaroce.flags.ack_req", "ACK_REQ", 16, nil, 0x0001)
f.retransmit  = ProtoField.bool("metaroce.flags.retransmit", "RETRANSMIT", 16, nil, 0x0002)
f.sealed      = ProtoField.bool("metaroce.flags.sealed", "SEALED", 16, nil, 0x0004)
f.encrypted   = ProtoField.bool("metaroce.flags.encrypted", "ENCRYPTED", 16, nil, 0x0008)
f.key_phase   = ProtoField.bool("metaroce.flags.key_phase", "KEY_PHASE", 16, nil, 0x0010)
f.gen_proof_f = ProtoField.bool("metaroce.flags.gen_proof", "GEN_PROOF", 16, nil, 0x0020)
f.solo_f      = ProtoField.bool("metaroce.flags.solo", "SOLO (the message's only packet)", 16, nil, 0x0040)
f.status_f    = ProtoField.bool("metaroce.flags.status", "STATUS (the READ ends with a status)", 16, nil, 0x0080)
f.dst_conn    = ProtoField.uint32("metaroce.dst_conn", "Destination connection")
f.src_conn    = ProtoField.uint32("metaroce.src_conn", "Source connection")
f.incarnation = ProtoField.uint32("metaroce.incarnation", "Incarnation")
f.path_id     = ProtoField.uint16("metaroce.path_id", "Path")
f.path_gen    = ProtoField.uint16("metaroce.path_gen", "Path generation")
f.psn         = ProtoField.uint32("metaroce.psn", "PSN")
f.timestamp   = ProtoField.uint64("metaroce.timestamp", "Timestamp (ns)")
-- message extension
f.stream      = ProtoField.uint16("metaroce.stream", "Stream")
f.payload_len = ProtoField.uint16("metaroce.payload_len", "Payload length (from the datagram)")
f.msg_seq     = ProtoField.uint32("metaroce.msg_seq", "Message sequence")
f.recv_seq    = ProtoField.uint32("metaroce.recv_seq", "Receive sequence")
f.offset      = ProtoField.uint32("metaroce.offset", "Offset")
f.msg_len     = ProtoField.uint32("metaroce.msg_len", "Message length")
f.rkey        = ProtoField.uint32("metaroce.rkey", "RKey", base.HEX)
f.remote_addr = ProtoField.uint64("metaroce.remote_addr", "Remote address", base.HEX)
f.imm         = ProtoField.uint32("metaroce.imm", "Immediate", base.HEX)
f.payload     = ProtoField.bytes("metaroce.payload", "Payload")
-- ACK
f.ack_count   = ProtoField.uint8("metaroce.ack.count", "Blocks")
f.ack_block   = ProtoField.none("metaroce.ack.block", "ACK block")
f.ack_bflags  = ProtoField.uint8("metaroce.ack.block_flags", "Block flags", base.HEX)
f.ack_nosack  = ProtoField.bool("metaroce.ack.no_sack", "NO_SACK (bitmap absent: nothing received above cum)", 8, nil, 0x01)
f.ack_path    = ProtoField.uint8("metaroce.ack.path_id", "Path")
f.ack_gen     = ProtoField.uint16("metaroce.ack.path_gen", "Path generation")
f.ack_cum     = ProtoField.uint32("metaroce.ack.cum", "Cumulative (next expected PSN)")
f.ack_sack    = ProtoField.bytes("metaroce.ack.sack", "SACK bitmap")
f.ack_sacked  = ProtoField.uint16("metaroce.ack.sacked", "PSNs SACKed")
f.ack_ecn     = ProtoField.uint32("metaroce.ack.ecn_ce", "ECN CE count")
f.ack_rate    = ProtoField.uint32("metaroce.ack.rate_hint", "Rate hint (Mbit/s)")
f.ack_ts      = ProtoField.uint64("metaroce.ack.ts_echo", "Timestamp echo (ns)")
-- NAK
f.nak_path    = ProtoField.uint16("metaroce.nak.path_id", "Path")
f.nak_gen     = ProtoField.uint16("metaroce.nak.path_gen", "Path generation")
f.nak_psn     = ProtoField.uint32("metaroce.nak.psn", "PSN")
f.nak_stream  = ProtoField.uint16("metaroce.nak.stream", "Stream")
f.nak_status  = ProtoField.uint8("metaroce.nak.status", "Status", base.DEC, nak_status)
f.nak_msg_seq = ProtoField.uint32("metaroce.nak.msg_seq", "Message sequence")
f.nak_rnr     = ProtoField.uint32("metaroce.nak.rnr_ns", "RNR back-off (ns)")
-- CONNECT / ACCEPT
f.node_id     = ProtoField.uint64("metaroce.connect.node_id", "Node")
f.c_paths     = ProtoField.uint16("metaroce.connect.paths", "Paths")
f.c_mtu       = ProtoField.uint16("metaroce.connect.mtu", "MTU")
f.c_streams   = ProtoField.uint16("metaroce.connect.streams", "Streams")
f.c_planes    = ProtoField.uint8("metaroce.connect.planes", "Planes")
f.c_token     = ProtoField.bytes("metaroce.connect.token", "Token")
f.proof       = ProtoField.uint64("metaroce.proof", "Proof tag (SipHash-2-4 under the receiver's token)", base.HEX)
f.gen_proof   = ProtoField.uint64("metaroce.gen_proof", "Generation proof (SipHash-2-4 under the receiver's token, no stamp)", base.HEX)
f.crc         = ProtoField.uint32("metaroce.crc", "CRC32C", base.HEX)
-- The sealed modes (docs/protocol.md §17): shown, not verified.
f.tag         = ProtoField.bytes("metaroce.tag", "AES-GCM tag")
f.pn          = ProtoField.uint64("metaroce.pn", "Packet number")
f.hello       = ProtoField.bytes("metaroce.hello", "Hello")
f.psk_mac     = ProtoField.bytes("metaroce.psk_mac", "PSK MAC")
f.ciphertext  = ProtoField.bytes("metaroce.ciphertext", "Enciphered body")

local e_short = ProtoExpert.new("metaroce.short", "Packet too short", expert.group.MALFORMED, expert.severity.ERROR)
local e_len = ProtoExpert.new("metaroce.length", "Length does not match the opcode", expert.group.MALFORMED, expert.severity.WARN)
local e_version = ProtoExpert.new("metaroce.version_unknown", "Not version 2: receivers drop it (version 1 had a 40-byte message extension)", expert.group.PROTOCOL, expert.severity.WARN)
local e_framing = ProtoExpert.new("metaroce.framing", "Malformed coalesced framing: receivers drop the whole datagram", expert.group.MALFORMED, expert.severity.ERROR)
p.experts = { e_short, e_len, e_version, e_framing }
f.coalesced   = ProtoField.uint8("metaroce.coalesced", "Coalesced packets")
f.inner_len   = ProtoField.uint16("metaroce.inner_len", "Inner packet length")

p.prefs.udp_port = Pref.uint("UDP port", 4794, "UDP destination port of MetaRoCE")

local HDR, CRC, BLOCK, BLOCK_NOSACK = 32, 4, 56, 24

-- The message extension's fields by opcode and flags (docs/protocol.md
-- 5.1): stream and msg_seq always; recv_seq for WRITE_IMM, SEND and
-- SEND_IMM; offset and msg_len unless SOLO (READ_REQ: msg_len only);
-- rkey and remote_addr for WRITE, WRITE_IMM and READ_REQ; imm for
-- WRITE_IMM, SEND_IMM and a READ_RESP with STATUS.
local function msg_layout(op, solo, status)
    local l = { { "stream", 2 }, { "msg_seq", 4 } }
    if op == 0x02 or op == 0x03 or op == 0x04 then l[#l + 1] = { "recv_seq", 4 } end
    if op == 0x05 then
        l[#l + 1] = { "msg_len", 4 }
    elseif not solo then
        l[#l + 1] = { "offset", 4 }
        l[#l + 1] = { "msg_len", 4 }
    end
    if op == 0x01 or op == 0x02 or op == 0x05 then
        l[#l + 1] = { "rkey", 4 }
        l[#l + 1] = { "remote_addr", 8 }
    end
    if op == 0x02 or op == 0x04 or (op == 0x06 and status) then l[#l + 1] = { "imm", 4 } end
    return l
end

local function popcount_byte(b)
    local n = 0
    while b > 0 do
        n = n + (b % 2)
        b = math.floor(b / 2)
    end
    return n
end

-- dissect_one shows one packet (alone in its datagram, or one of a
-- coalesced datagram's) and returns its line for the Info column.
local function dissect_one(buf, pinfo, tree)
    local len = buf:len()
    local t = tree:add(p, buf(), "MetaRoCE")
    if len < HDR + CRC then
        t:add_proto_expert_info(e_short)
        return "too short"
    end
    local op = buf(1, 1):uint()
    -- The trailer: the CRC32C, or in the sealed modes (§17.2) a PSK MAC
    -- (CONNECT with its hello before it, RESET, CLOSE_ACK) or the
    -- connection's tag and packet number (ACCEPT's hello after them).
    local flags = buf(2, 2):uint()
    local sealed, encrypted = math.floor(flags / 4) % 2 == 1, math.floor(flags / 8) % 2 == 1
    local trl, kind = CRC, "crc"
    if sealed then
        if op == 0x20 then trl, kind = 32, "mac_hello"
        elseif op == 0x23 or op == 0x25 then trl, kind = 16, "mac"
        elseif op == 0x21 then trl, kind = 40, "aead_hello"
        else trl, kind = 24, "aead" end
    end
    if len < HDR + trl then
        t:add_proto_expert_info(e_short)
        return "too short"
    end
    local name = opcodes[op] or string.format("0x%02x", op)
    local ver = t:add(f.version, buf(0, 1))
    if buf(0, 1):uint() ~= 2 then
        ver:add_proto_expert_info(e_version)
    end
    t:add(f.opcode, buf(1, 1))
    local fl = t:add(f.flags, buf(2, 2))
    fl:add(f.ack_req, buf(2, 2))
    fl:add(f.retransmit, buf(2, 2))
    fl:add(f.sealed, buf(2, 2))
    fl:add(f.encrypted, buf(2, 2))
    fl:add(f.key_phase, buf(2, 2))
    fl:add(f.gen_proof_f, buf(2, 2))
    fl:add(f.solo_f, buf(2, 2))
    fl:add(f.status_f, buf(2, 2))
    t:add(f.dst_conn, buf(4, 4))
    t:add(f.src_conn, buf(8, 4))
    t:add(f.incarnation, buf(12, 4))
    t:add(f.path_id, buf(16, 2))
    t:add(f.path_gen, buf(18, 2))
    t:add(f.psn, buf(20, 4))
    local gen_proof = math.floor(flags / 32) % 2 == 1
    if op >= 0x10 and op ~= 0x20 and kind == "crc" then
        -- Mode none: unsequenced packets but CONNECT carry a proof tag there (protocol.md 7.6).
        t:add(f.proof, buf(24, 8))
    elseif gen_proof and op >= 0x01 and op <= 0x07 then
        -- GEN_PROOF: a sequenced packet of a generation its receiver has not
        -- acknowledged yet proves it there instead of a stamp (protocol.md 8.2).
        t:add(f.gen_proof, buf(24, 8))
    else
        t:add(f.timestamp, buf(24, 8))
    end
    local body = len - HDR - trl
    local info = string.format("%s conn %d path %d", name, buf(4, 4):uint(), buf(16, 2):uint())
    if gen_proof then
        info = info .. string.format(" gen %d (proof)", buf(18, 2):uint())
    end
    if encrypted and (kind == "aead" or kind == "aead_hello") then
        -- Mode encrypt: everything after the header is enciphered.
        if body > 0 then
            t:add(f.ciphertext, buf(HDR, body))
        end
        info = info .. string.format(" psn %d (enciphered, %d bytes)", buf(20, 4):uint(), body)
    elseif op >= 0x01 and op <= 0x06 then
        local solo, status = math.floor(flags / 64) % 2 == 1, math.floor(flags / 128) % 2 == 1
        local layout = msg_layout(op, solo, status)
        local ext = 0
        for _, fd in ipairs(layout) do ext = ext + fd[2] end
        if body < ext then
            t:add_proto_expert_info(e_len)
        else
            local m, v = HDR, {}
            for _, fd in ipairs(layout) do
                t:add(f[fd[1]], buf(m, fd[2]))
                if fd[2] == 4 then v[fd[1]] = buf(m, 4):uint() end
                m = m + fd[2]
            end
            local pl = body - ext
            t:add(f.payload_len, buf(HDR, 0), pl)
            if (op == 0x05 or status) and pl > 0 then
                t:add_proto_expert_info(e_len)
            elseif pl > 0 then
                t:add(f.payload, buf(m, pl))
            end
            info = info .. string.format(" psn %d stream %d seq %d off %d len %d", buf(20, 4):uint(),
                buf(HDR, 2):uint(), v.msg_seq, v.offset or 0, pl)
        end
    elseif op == 0x07 then
        info = info .. string.format(" psn %d", buf(20, 4):uint())
    elseif op == 0x10 then
        if body < 4 then
            t:add_proto_expert_info(e_len)
        else
            local n = buf(HDR, 1):uint()
            t:add(f.ack_count, buf(HDR, 1))
            -- Blocks are BLOCK bytes, or BLOCK_NOSACK when their flags
            -- say the SACK bitmap is left out (all zero).
            local o, ok = HDR + 4, true
            for i = 0, n - 1 do
                if o >= HDR + body then ok = false break end
                local fl = buf(o, 1):uint()
                local len = BLOCK
                if fl == 0x01 then len = BLOCK_NOSACK elseif fl ~= 0 then ok = false break end
                o = o + len
            end
            if not ok or o ~= HDR + body then
                t:add_proto_expert_info(e_len)
            else
                o = HDR + 4
                for i = 0, n - 1 do
                    local nosack = buf(o, 1):uint() == 0x01
                    local len, rest = BLOCK, o + 40
                    local sacked = 0
                    if nosack then
                        len, rest = BLOCK_NOSACK, o + 8
                    else
                        for k = 0, 31 do
                            sacked = sacked + popcount_byte(buf(o + 8 + k, 1):uint())
                        end
                    end
                    local b = t:add(f.ack_block, buf(o, len))
                    b:set_text(string.format("ACK block: path %d cum %d sacked %d", buf(o + 1, 1):uint(), buf(o + 4, 4):uint(), sacked))
                    local bf = b:add(f.ack_bflags, buf(o, 1))
                    bf:add(f.ack_nosack, buf(o, 1))
                    b:add(f.ack_path, buf(o + 1, 1))
                    b:add(f.ack_gen, buf(o + 2, 2))
                    b:add(f.ack_cum, buf(o + 4, 4))
                    if not nosack then
                        b:add(f.ack_sack, buf(o + 8, 32))
                        b:add(f.ack_sacked, buf(o + 8, 32), sacked)
                    end
                    b:add(f.ack_ecn, buf(rest, 4))
                    b:add(f.ack_rate, buf(rest + 4, 4))
                    b:add(f.ack_ts, buf(rest + 8, 8))
                    o = o + len
                end
                info = info .. string.format(" blocks %d", n)
            end
        end
    elseif op == 0x11 then
        if body ~= 20 then
            t:add_proto_expert_info(e_len)
        else
            t:add(f.nak_path, buf(HDR, 2))
            t:add(f.nak_gen, buf(HDR + 2, 2))
            t:add(f.nak_psn, buf(HDR + 4, 4))
            t:add(f.nak_stream, buf(HDR + 8, 2))
            t:add(f.nak_status, buf(HDR + 10, 1))
            t:add(f.nak_msg_seq, buf(HDR + 12, 4))
            t:add(f.nak_rnr, buf(HDR + 16, 4))
            info = info .. " " .. (nak_status[buf(HDR + 10, 1):uint()] or "?")
        end
    elseif op == 0x20 or op == 0x21 then
        if body ~= 32 then
            t:add_proto_expert_info(e_len)
        else
            t:add(f.node_id, buf(HDR, 8))
            t:add(f.c_paths, buf(HDR + 8, 2))
            t:add(f.c_mtu, buf(HDR + 10, 2))
            t:add(f.c_streams, buf(HDR + 12, 2))
            t:add(f.c_planes, buf(HDR + 14, 1))
            t:add(f.c_token, buf(HDR + 16, 16))
            info = info .. string.format(" paths %d mtu %d", buf(HDR + 8, 2):uint(), buf(HDR + 10, 2):uint())
        end
    elseif body ~= 0 then
        t:add_proto_expert_info(e_len)
    end
    if kind == "crc" then
        t:add(f.crc, buf(len - CRC, CRC))
    elseif kind == "mac" or kind == "mac_hello" then
        if kind == "mac_hello" then
            t:add(f.hello, buf(len - 32, 16))
        end
        t:add(f.psk_mac, buf(len - 16, 16))
    else
        local e = len
        if kind == "aead_hello" then
            e = len - 16
            t:add(f.hello, buf(e, 16))
        end
        t:add(f.tag, buf(e - 24, 16))
        t:add(f.pn, buf(e - 8, 8))
        info = info .. string.format(" pn %s", tostring(buf(e - 8, 8):uint64()))
    end
    return info
end

-- A coalesced datagram (docs/protocol.md 2.1): 0xC2, then each packet
-- after its 2-byte length. Its framing is checked as a receiver does;
-- where it fails, the packets before the fault are shown and the rest is
-- flagged (a receiver drops the whole datagram).
local MARK = 0xC2

function p.dissector(buf, pinfo, tree)
    local len = buf:len()
    pinfo.cols.protocol = "MetaRoCE"
    if len == 0 or buf(0, 1):uint() ~= MARK then
        pinfo.cols.info = dissect_one(buf, pinfo, tree)
        return len
    end
    local t = tree:add(p, buf(), "MetaRoCE coalesced datagram")
    local off, n, infos, bad = 1, 0, {}, false
    while off < len do
        local l = len - off >= 2 and buf(off, 2):uint() or 0
        if l < HDR + CRC or l > len - off - 2 or buf(off + 2, 1):uint() == MARK then
            bad = true
            break
        end
        t:add(f.inner_len, buf(off, 2))
        infos[#infos + 1] = dissect_one(buf(off + 2, l):tvb(), pinfo, tree)
        off = off + 2 + l
        n = n + 1
    end
    if n < 2 then
        bad = true
    end
    t:add(f.coalesced, buf(0, 1), n)
    if bad then
        t:add_proto_expert_info(e_framing)
    end
    pinfo.cols.info = string.format("[%d coalesced%s] ", n, bad and ", malformed" or "") .. table.concat(infos, " | ")
    return len
end

local current_port = 0
local function register()
    local udp = DissectorTable.get("udp.port")
    if current_port ~= 0 then
        udp:remove(current_port, p)
    end
    current_port = p.prefs.udp_port
    udp:add(current_port, p)
end

function p.prefs_changed()
    register()
end

register()
