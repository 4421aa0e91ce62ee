package admin

import (
	"reflect"
	"testing"
)

// TestOrderlyArgs: Java's spellings of the orderly flag become one pflag form; other uses of -o
// (the output format) are left alone.
func TestOrderlyArgs(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"-g", "G", "--consumeMessageOrderly", "true"}, []string{"-g", "G", "--consumeMessageOrderly=true"}},
		{[]string{"--consumeMessageOrderly=false"}, []string{"--consumeMessageOrderly=false"}},
		{[]string{"--consumeMessageOrderly", "-g", "G"}, []string{"--consumeMessageOrderly", "-g", "G"}},
		{[]string{"-o", "true", "-g", "G"}, []string{"--consumeMessageOrderly=true", "-g", "G"}},
		{[]string{"-o=false"}, []string{"--consumeMessageOrderly=false"}},
		{[]string{"-o", "json"}, []string{"-o", "json"}},
	} {
		if got := orderlyArgs(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %q, want %q", c.in, got, c.want)
		}
	}
}
