package verbslib_test

import "testing"

// TestWRExtended runs ctest/wrex.c: every supported ibv_wr_* call moves
// data the other process checks (ops); what is not supported fails the
// batch cleanly and posts nothing (refuse); ibv_query_qp_data_in_order
// answers for the transport (inorder); ibv_create_cq_ex's polling API
// reports what ibv_poll_cq would (cqex).
func TestWRExtended(t *testing.T) {
	dir := libDir(t)
	bin := buildC(t, dir, "wrex")
	cases := []struct {
		name string
		min  int
		want []string
	}{
		{"ops", 32, []string{`wr_rdma_write: success`, `wr_rdma_write_imm: success`, `wr_send \+ wr_set_sge_list: success`,
			`wr_send_imm \+ wr_set_inline_data: success`, `wr_send \+ wr_set_inline_data_list: success`,
			`wr_send with IBV_SEND_INLINE \+ wr_set_sge: success`, `wr_rdma_read: success`, `READ data intact`,
			`batch WRITE 3/3 \(2/3 unsignaled\): success, wr_id 203`, `responder memory as written, nothing past it`}},
		{"refuse", 30, []string{`an empty batch: wr_complete 0$`, `create_qp_ex with atomics: Operation not supported`,
			`ibv_qp_to_qp_ex of an ibv_create_qp QP: NULL`, `atomic_fetch_add: wr_complete Operation not supported`,
			`bind_mw: wr_complete Operation not supported`, `local_inv: wr_complete Operation not supported`,
			`set_ud_addr: wr_complete Operation not supported`, `two SGEs: wr_complete Invalid argument`,
			`more WRs than the send queue: wr_complete Cannot allocate memory`,
			`completions from refused or aborted batches: none`, `a WRITE afterwards: success`,
			`responder memory: only the last WRITE landed`}},
		{"cqex", 10, []string{`a CQ with completion timestamps: Operation not supported`,
			`requester read 4/4 completions by start/next/end_poll$`, `responder read 2/2 receives \(.*\)$`}},
		// metaroce places only a WRITE's last byte last (the default
		// transport here).
		{"inorder", 22, []string{`metaroce WRITE: flags 0 -> 1, RETURN_CAPS -> 0x1`,
			`metaroce WRITE_IMM: flags 0 -> 1, RETURN_CAPS -> 0x1`, `metaroce SEND: flags 0 -> 0, RETURN_CAPS -> 0,`,
			`metaroce READ: flags 0 -> 0, RETURN_CAPS -> 0,`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Logf("%s", runCase(t, dir, bin, c.name, c.min, c.want))
		})
	}
	// The same over rocev2, which places every packet in PSN order.
	for _, c := range cases {
		if c.name == "inorder" {
			c.want = []string{`rocev2 WRITE: flags 0 -> 1, RETURN_CAPS -> 0x1`, `rocev2 WRITE_IMM: flags 0 -> 1, RETURN_CAPS -> 0x1`,
				`rocev2 SEND: flags 0 -> 1, RETURN_CAPS -> 0x1`, `rocev2 SEND_IMM: flags 0 -> 1, RETURN_CAPS -> 0x1`,
				`rocev2 READ: flags 0 -> 1, RETURN_CAPS -> 0x1`}
		}
		t.Run("rocev2/"+c.name, func(t *testing.T) {
			t.Logf("%s", runCase(t, dir, bin, c.name, c.min, c.want, "METAROCE_TRANSPORT=rocev2"))
		})
	}
}
