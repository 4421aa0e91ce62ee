package dledger

import "testing"

func TestLogBehind(t *testing.T) {
	for _, c := range []struct {
		term, index, ourTerm, ourIndex uint64
		want                           bool
	}{
		{5, 10, 5, 11, true},  // same term, shorter
		{5, 11, 5, 11, false}, // equal: the vote is granted
		{5, 12, 5, 11, false}, // longer
		{4, 20, 5, 11, true},  // older last term wins over length
		{6, 1, 5, 11, false},  // newer last term
	} {
		if got := logBehind(c.term, c.index, c.ourTerm, c.ourIndex); got != c.want {
			t.Errorf("logBehind(%d, %d, %d, %d) = %v, want %v", c.term, c.index, c.ourTerm, c.ourIndex, got, c.want)
		}
	}
}
