package sqlfilter

import (
	"errors"
	"testing"
)

func TestMatch(t *testing.T) {
	props := map[string]string{"a": "2", "b": "10.5", "region": "eu-west", "flag": "true", "TAGS": "TagA", "q": "it's"}
	cases := []struct {
		expr string
		want bool
	}{
		{"a = 2", true},
		{"a = '2'", true},
		{"a <> 2", false},
		{"a != 3", true},
		{"a > 1 AND a < 3", true},
		{"a >= 2 and a <= 2", true},
		{"a BETWEEN 0 AND 3", true},
		{"a NOT BETWEEN 0 AND 3", false},
		{"b > 10", true},
		{"b < 1e2", true},
		{"a > -1", true},
		{"region = 'eu-west'", true},
		{"region IN ('eu-west', 'us')", true},
		{"region NOT IN ('eu-west')", false},
		{"region STARTSWITH 'eu'", true},
		{"region ENDSWITH 'west'", true},
		{"region CONTAINS 'u-w'", true},
		{"region NOT CONTAINS 'x'", true},
		{"missing IS NULL", true},
		{"a IS NOT NULL", true},
		{"missing = 1", false},
		{"NOT (missing = 1)", false}, // unknown stays unknown
		{"missing = 1 OR a = 2", true},
		{"(a = 1 OR a = 2) AND TAGS = 'TagA'", true},
		{"flag", true},
		{"flag = TRUE", true},
		{"TRUE", true},
		{"FALSE OR a = 2", true},
		{"region > 'a'", false}, // ordering between strings: unknown
		{"region = 5", false},   // not a number: unknown
		{"q = 'it''s'", true},
		{"A = 2", false}, // property names are case-sensitive
		{"a=2 AND (b>10 OR region='x')", true},
	}
	for _, c := range cases {
		e, err := Parse(c.expr)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.expr, err)
			continue
		}
		if got := e.Match(props); got != c.want {
			t.Errorf("%q on %v = %v, want %v", c.expr, props, got, c.want)
		}
	}
	if e, _ := Parse("a IS NULL"); !e.Match(nil) {
		t.Error("nil properties: a IS NULL should match")
	}
}

func TestParseErrors(t *testing.T) {
	for _, expr := range []string{
		"", "   ", "a =", "a = 'x", "(a = 1", "a = 1)", "a BETWEEN 1", "a IN 'x'", "a IN (1, 2)",
		"a NOT 3", "a ! 3", "a = 1 AND", "a = 1 b = 2", "a CONTAINS 3", "a = #", "a IS 3", "1 = 1 2",
		"a = 1..2",
	} {
		if _, err := Parse(expr); err == nil || !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %v, want a syntax error", expr, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"a = 2", "a BETWEEN 0 AND 3 OR b IN ('x','y')", "NOT (c IS NULL)", "d STARTSWITH 'z'", "'x'''"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := Parse(s)
		if err != nil {
			return
		}
		e.Match(map[string]string{"a": "1", "b": "x", "c": "true"})
	})
}
