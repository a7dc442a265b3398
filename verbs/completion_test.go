package verbs

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompletionQueueGrowsAndKeepsOrder(t *testing.T) {
	q := NewCompletionQueue(1)
	for i := 0; i < 40; i++ {
		q.push(WorkCompletion{WRID: uint64(i)})
	}
	require.Equal(t, 40, q.Len())
	out := make([]WorkCompletion, 7)
	next := uint64(0)
	for q.Len() > 0 {
		n := q.Poll(out)
		for _, wc := range out[:n] {
			require.Equal(t, next, wc.WRID)
			next++
		}
	}
	require.Equal(t, uint64(40), next)
	require.Zero(t, q.Poll(out))
}

// TestCompletionQueueOnReady: the callback fires at the first push after
// the queue was drained to empty, once however many pushes follow, and
// again only after a Poll empties it.
func TestCompletionQueueOnReady(t *testing.T) {
	q := NewCompletionQueue(4)
	calls := 0
	q.OnReady(func() { calls++ })
	q.push(WorkCompletion{WRID: 1})
	q.push(WorkCompletion{WRID: 2})
	require.Equal(t, 1, calls)
	out := make([]WorkCompletion, 1)
	require.Equal(t, 1, q.Poll(out)) // one left: still flagged
	q.push(WorkCompletion{WRID: 3})
	require.Equal(t, 1, calls)
	out = make([]WorkCompletion, 8)
	require.Equal(t, 2, q.Poll(out)) // empty now
	q.push(WorkCompletion{WRID: 4})
	require.Equal(t, 2, calls)
}

// TestWorkCompletionFieldsPushCopies: CompletionQueue.push copies a
// completion field by field and Poll leaves popped slots uncleared, which
// is right only while WorkCompletion has exactly the fields push names and
// none of them holds a pointer. A new field fails here until push copies
// it too.
func TestWorkCompletionFieldsPushCopies(t *testing.T) {
	ty := reflect.TypeOf(WorkCompletion{})
	want := []string{"WRID", "Status", "Opcode", "ByteLen", "Imm", "HasImm", "QPN"}
	if ty.NumField() != len(want) {
		t.Fatalf("WorkCompletion has %d fields, push copies %d: %v", ty.NumField(), len(want), want)
	}
	for i, name := range want {
		f := ty.Field(i)
		if f.Name != name {
			t.Errorf("field %d is %s, push copies %s there", i, f.Name, name)
		}
		switch f.Type.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.String, reflect.Interface, reflect.Func, reflect.Chan, reflect.UnsafePointer:
			t.Errorf("field %s holds a pointer (%s): popped slots would keep it alive", f.Name, f.Type)
		}
	}
	cq := NewCompletionQueue(2)
	in := WorkCompletion{WRID: 1 << 40, Status: StatusRemoteAccessError, Opcode: WCRecv, ByteLen: 7, Imm: 9, HasImm: true, QPN: 33}
	for range 3 { // around the ring more than once: slots are reused uncleared
		cq.push(in)
		var out [1]WorkCompletion
		if n := cq.Poll(out[:]); n != 1 || out[0] != in {
			t.Fatalf("Poll = %d, %+v; want 1, %+v", n, out[0], in)
		}
		in.WRID++
	}
}
