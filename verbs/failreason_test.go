package verbs

import "testing"

// Every reason has its own words: a front end prints them.
func TestFailReasonStrings(t *testing.T) {
	seen := map[string]FailReason{}
	for r := FailNone; r <= FailLocalError; r++ {
		s := r.String()
		if s == "unknown" {
			t.Fatalf("reason %d has no name", r)
		}
		if o, ok := seen[s]; ok {
			t.Fatalf("reasons %d and %d both read %q", o, r, s)
		}
		seen[s] = r
	}
	if FailReason(200).String() != "unknown" {
		t.Fatal("an undefined reason must read unknown")
	}
}
