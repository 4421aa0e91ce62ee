package bench

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"time"
)

// errorLog prints the first few errors as they happen and counts all of
// them by message, so that a failing run shows what went wrong without
// flooding the terminal.
type errorLog struct {
	mu       sync.Mutex
	w        io.Writer
	limit    int // errors printed as they happen
	printed  int
	total    uint64
	counts   map[string]uint64
	distinct int // cap on distinct messages kept in counts
}

// maxErrText bounds the length of a kept error message.
const maxErrText = 300

func newErrorLog(w io.Writer, limit int) *errorLog {
	return &errorLog{w: w, limit: limit, counts: make(map[string]uint64), distinct: 64}
}

// Add records err (nil is ignored).
func (e *errorLog) Add(err error) {
	if err == nil {
		return
	}
	e.AddText(err.Error())
}

// AddText records an error described by msg.
func (e *errorLog) AddText(msg string) {
	if len(msg) > maxErrText {
		msg = msg[:maxErrText] + "..."
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.total++
	if _, ok := e.counts[msg]; ok || len(e.counts) < e.distinct {
		e.counts[msg]++
	} else {
		e.counts["(other errors)"]++
	}
	if e.printed < e.limit && e.w != nil {
		e.printed++
		fmt.Fprintf(e.w, "error #%d at %s: %s\n", e.total, time.Now().Format("15:04:05.000"), msg)
		if e.printed == e.limit {
			fmt.Fprintf(e.w, "(further errors are counted, not printed)\n")
		}
	}
}

// Total returns the number of recorded errors.
func (e *errorLog) Total() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.total
}

// Top returns up to n "count× message" strings, most frequent first.
func (e *errorLog) Top(n int) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	type kv struct {
		msg string
		n   uint64
	}
	all := make([]kv, 0, len(e.counts))
	for m, c := range e.counts {
		all = append(all, kv{m, c})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].msg < all[j].msg
	})
	if len(all) > n {
		all = all[:n]
	}
	out := make([]string, len(all))
	for i, x := range all {
		out[i] = fmt.Sprintf("%d× %s", x.n, x.msg)
	}
	return out
}
