package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"a":1}`, `{"a":1}`},
		{`{0:"x",1:"y"}`, `{"0":"x","1":"y"}`},
		{`{ -1 : 2 }`, `{ "-1": 2 }`},
		{`{"t":{0:12,1:40}}`, `{"t":{"0":12,"1":40}}`},
		{`[{0:"a"},{1:"b"}]`, `[{"0":"a"},{"1":"b"}]`},
		{`{{"brokerName":"b","queueId":0,"topic":"T"}:1}`, `{"{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"T\"}":1}`},
		{`{"s":"{0:1}",0:"}"}`, `{"s":"{0:1}","0":"}"}`},
		{`{"esc":"a\"b",2:3}`, `{"esc":"a\"b","2":3}`},
	}
	for _, c := range cases {
		got, err := Normalize([]byte(c.in))
		if err != nil {
			t.Fatalf("Normalize(%s): %v", c.in, err)
		}
		if string(got) != c.want {
			t.Errorf("Normalize(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestNormalizeMalformed(t *testing.T) {
	for _, in := range []string{`{0:`, `{"a":1`, `{0 1}`, `}`, `{"abc`, `{{"a":1}`} {
		if _, err := Normalize([]byte(in)); !errors.Is(err, ErrMalformedJSON) {
			// `{0:` has no value: Normalize may accept it, but Decode must fail.
			var v map[string]any
			if Decode([]byte(in), &v) == nil {
				t.Errorf("Decode(%s) succeeded", in)
			}
		}
	}
}

func FuzzDecodeRoute(f *testing.F) {
	f.Add([]byte(`{"brokerDatas":[{"brokerAddrs":{0:"a:1"},"brokerName":"b","cluster":"c"}],"queueDatas":[]}`))
	f.Add([]byte(`{{"a":1}:2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r TopicRouteData
		_ = Decode(b, &r) // must not panic
		var s TopicStatsTable
		_ = Decode(b, &s)
	})
}

// FuzzNormalize checks: never panics; valid JSON is returned unchanged; a successful result is
// a fixed point (normalizing it again changes nothing).
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{`{0:"a"}`, `{{"a":1}:2}`, `{"a":[1,{2:3}]}`, `{"s":"\"{0:1}"}`, `[]`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := Normalize(b)
		if err != nil {
			return
		}
		if json.Valid(b) && !bytes.Equal(out, b) {
			t.Fatalf("valid JSON changed: %q → %q", b, out)
		}
		again, err := Normalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point: %q → %q → %q (%v)", b, out, again, err)
		}
	})
}

func TestNormalizeNestingBounded(t *testing.T) {
	deep := []byte(`{` + strings.Repeat(`{`, 10) + `"a":1` + strings.Repeat(`}:1`, 10) + `}`)
	if _, err := Normalize(deep); !errors.Is(err, ErrMalformedJSON) {
		t.Fatalf("err %v", err)
	}
}
