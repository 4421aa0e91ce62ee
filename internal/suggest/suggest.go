// Package suggest finds the known names closest to a mistyped one, for "did you mean" hints in
// configuration warnings (package config) and unknown mqadmin commands (package admin).
package suggest

import (
	"sort"
	"strings"
)

// Closest returns up to max candidates nearest to word: a case-insensitive exact match alone if
// there is one, otherwise the candidates within a small edit distance (about a third of the
// word's length, at least 1, at most 3) at the smallest distance found, or, when none is that
// close, those having word as a case-insensitive prefix; ties in alphabetical order. It returns
// nil when nothing is close.
func Closest(word string, candidates []string, max int) []string {
	if word == "" || max <= 0 {
		return nil
	}
	lw := strings.ToLower(word)
	for _, c := range candidates {
		if strings.ToLower(c) == lw && c != word {
			return []string{c}
		}
	}
	limit := len([]rune(word)) / 3
	if limit < 1 {
		limit = 1
	}
	if limit > 3 {
		limit = 3
	}
	type scored struct {
		name string
		d    int
	}
	var hits, prefixed []scored
	best := limit
	seen := map[string]bool{}
	for _, c := range candidates {
		if seen[c] || c == word {
			continue
		}
		seen[c] = true
		lc := strings.ToLower(c)
		d := distance(lw, lc)
		switch {
		case d <= limit:
			hits = append(hits, scored{c, d})
			best = min(best, d)
		case len(lw) >= 3 && strings.HasPrefix(lc, lw):
			prefixed = append(prefixed, scored{c, d})
		}
	}
	if len(hits) == 0 {
		hits = prefixed
	} else {
		kept := hits[:0]
		for _, h := range hits {
			if h.d == best {
				kept = append(kept, h)
			}
		}
		hits = kept
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].d != hits[j].d {
			return hits[i].d < hits[j].d
		}
		return hits[i].name < hits[j].name
	})
	var out []string
	for i := 0; i < len(hits) && i < max; i++ {
		out = append(out, hits[i].name)
	}
	return out
}

// Hint is Closest formatted for a message: ` (did you mean "a"?)`, ` (did you mean "a" or
// "b"?)`, or "" when nothing is close.
func Hint(word string, candidates []string) string {
	c := Closest(word, candidates, 3)
	if len(c) == 0 {
		return ""
	}
	q := make([]string, len(c))
	for i, s := range c {
		q[i] = `"` + s + `"`
	}
	if len(q) == 1 {
		return " (did you mean " + q[0] + "?)"
	}
	return " (did you mean " + strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1] + "?)"
}

// distance is the Damerau-Levenshtein (optimal string alignment) distance between a and b:
// insertions, deletions, substitutions and swaps of two neighbouring characters cost 1.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows suffice: the current one, the previous one, and the one before it (for swaps).
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
