package suggest

import (
	"reflect"
	"testing"
)

func TestClosest(t *testing.T) {
	keys := []string{"listenPort", "haListenPort", "brokerName", "brokerIP1", "fileReservedTime", "clusterList", "topicList", "topicRoute"}
	cases := []struct {
		word string
		want []string
	}{
		{"listenPrt", []string{"listenPort"}},
		{"LISTENPORT", []string{"listenPort"}},
		{"clusterlist", []string{"clusterList"}},
		{"topiclst", []string{"topicList"}},
		{"brokerNmae", []string{"brokerName"}}, // swap
		{"topic", []string{"topicList", "topicRoute"}},
		{"zzzzzz", nil},
		{"", nil},
	}
	for _, c := range cases {
		if got := Closest(c.word, keys, 3); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Closest(%q) = %v, want %v", c.word, got, c.want)
		}
	}
	if h := Hint("listenPrt", keys); h != ` (did you mean "listenPort"?)` {
		t.Errorf("Hint = %q", h)
	}
	if h := Hint("qqqqqq", keys); h != "" {
		t.Errorf("Hint = %q, want empty", h)
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"listenPrt", "listenPort", 1}} {
		if got := distance(c.a, c.b); got != c.d {
			t.Errorf("distance(%q,%q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

func FuzzClosest(f *testing.F) {
	f.Add("listenPrt")
	f.Add("")
	f.Add("ÄÖü\x00")
	f.Fuzz(func(t *testing.T, w string) {
		got := Closest(w, []string{"listenPort", "brokerName", "a"}, 2)
		if len(got) > 2 {
			t.Fatalf("too many: %v", got)
		}
	})
}
