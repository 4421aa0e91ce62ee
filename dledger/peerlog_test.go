package dledger

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// syncBuffer is a bytes.Buffer safe for the quiet check's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) count(sub string) int { return strings.Count(s.String(), sub) }

func newTestPeerLog(out *syncBuffer) (*peerLog, *time.Time) {
	base := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Debug, Output: out})
	p := newPeerLog(base)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p.st.now = func() time.Time { return now }
	return p, &now
}

// TestPeerLogCollapsesFailures: 90 s of a dead follower, as raft reports it (heartbeat,
// appendEntries and vote failures several times a second), give one WARN, a summary every 30 s
// and an INFO when raft pipelines to the peer again; other lines and other peers pass through.
func TestPeerLogCollapsesFailures(t *testing.T) {
	var out syncBuffer
	p, now := newTestPeerLog(&out)
	defer p.close()
	var l hclog.Logger = p.Named("x").With("k", "v") // derived loggers share the state
	dead := raft.Server{ID: "n1", Address: "127.0.0.1:40912"}
	refused := errors.New("dial tcp 127.0.0.1:40912: connect: connection refused")
	lines := 0
	for i := 0; i < 90*5; i++ { // five failures a second for 90 s
		*now = now.Add(200 * time.Millisecond)
		switch i % 3 {
		case 0:
			l.Error("failed to heartbeat to", "peer", dead.Address, "backoff time", time.Millisecond, "error", refused)
		case 1:
			l.Error("failed to appendEntries to", "peer", dead, "error", refused)
		case 2:
			l.Log(hclog.Error, "failed to make requestVote RPC", "target", dead, "error", refused, "term", 3)
		}
		lines++
	}
	l.Warn("failed to contact quorum of nodes, stepping down") // not per peer: passes through
	l.Error("failed to appendEntries to", "peer", raft.Server{ID: "n2", Address: "127.0.0.1:40913"}, "error", refused)
	if got := out.count("[ERROR]"); got != 0 {
		t.Errorf("%d ERROR lines for %d failures, want 0:\n%s", got, lines, out.String())
	}
	if got := out.count("peer does not answer"); got != 2 { // n1 and n2, once each
		t.Errorf("first-failure WARNs = %d, want 2:\n%s", got, out.String())
	}
	if got := out.count("peer still does not answer"); got != 2 { // at 30 s and 60 s (90 s: the loop ended just before)
		t.Errorf("summaries = %d, want 2:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), "failures=150") {
		t.Errorf("a summary does not count the 30 s of failures:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "failed to contact quorum") {
		t.Errorf("an unrelated WARN was dropped")
	}
	*now = now.Add(time.Second)
	l.Info(peerRecoveredMsg, "peer", dead)
	if !strings.Contains(out.String(), "peer answers again") || !strings.Contains(out.String(), "failures=450") {
		t.Errorf("no recovery INFO with the count:\n%s", out.String())
	}
	// After recovery a new failure is a first failure again.
	l.Error("failed to heartbeat to", "peer", dead.Address, "error", refused)
	if got := out.count("peer does not answer"); got != 3 {
		t.Errorf("first-failure WARNs after recovery = %d, want 3", got)
	}
	// A failure line without a peer argument is not collapsed.
	l.Error("failed to heartbeat to", "error", refused)
	if out.count("[ERROR]") != 1 {
		t.Errorf("a line without a peer must pass through:\n%s", out.String())
	}
}

// TestPeerLogQuietEnds: a peer nothing failed against for quietAfter gets an INFO and its
// record ends, through the timer.
func TestPeerLogQuietEnds(t *testing.T) {
	var out syncBuffer
	p, _ := newTestPeerLog(&out)
	defer p.close()
	p.st.now = time.Now
	p.st.quietAfter = 50 * time.Millisecond
	p.Error("failed to make requestVote RPC", "target", raft.Server{ID: "n2", Address: "127.0.0.1:1"}, "error", "refused")
	deadline := time.Now().Add(10 * time.Second)
	for out.count("no failed RPC to peer") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no quiet INFO within 10 s:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.st.mu.Lock()
	n := len(p.st.peers)
	p.st.mu.Unlock()
	if n != 0 {
		t.Errorf("%d records left after the quiet check", n)
	}
	var nilLog *peerLog
	nilLog.close() // a node that never built raft's config
}

// TestPeerLogLevels: which of raft's ERROR lines stay ERROR. A leadership that ends because a
// follower saw a newer term, and a follower that needs entries already compacted away (a
// snapshot follows), are written at WARN; a snapshot that cannot reach a dead follower is
// collapsed like any other failed RPC to it; raft's own storage failures (and a follower's
// failed install, which names no peer) stay ERROR.
func TestPeerLogLevels(t *testing.T) {
	peer := raft.Server{ID: "n1", Address: "127.0.0.1:40912"}
	refused := errors.New("connection refused")
	for _, tc := range []struct {
		name  string
		msg   string
		args  []any
		level string // the level the line is written at; "" when collapsed into the first-failure WARN
	}{
		{"newer term", "peer has newer term, stopping replication", []any{"peer", peer}, "[WARN]"},
		{"snapshot to dead peer", "failed to send snapshot to", []any{"peer", peer, "error", refused}, ""},
		{"install RPC to dead peer", "failed to install snapshot", []any{"peer", peer.ID, "id", "1-2-3", "error", refused}, ""},
		{"follower's own install", "failed to install snapshot", []any{"error", refused}, "[ERROR]"},
		{"follower behind the compacted log", "failed to get log", []any{"index", 1, "error", raft.ErrLogNotFound}, "[WARN]"},
		{"log store", "failed to get log", []any{"index", 7, "error", refused}, "[ERROR]"},
		{"vote persist", "failed to persist vote", []any{"error", refused}, "[ERROR]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out syncBuffer
			p, _ := newTestPeerLog(&out)
			defer p.close()
			p.Log(hclog.Error, tc.msg, tc.args...) // raft reaches Error directly or through Log
			got := out.String()
			if tc.level == "" {
				if out.count("[ERROR]") != 0 || out.count("peer does not answer") != 1 || strings.Contains(got, tc.msg+":") {
					t.Fatalf("want the line collapsed into one first-failure WARN, got:\n%s", got)
				}
				return
			}
			if !strings.Contains(got, tc.level) || !strings.Contains(got, tc.msg) || strings.Count(got, "\n") != 1 {
				t.Fatalf("want one %s line %q, got:\n%s", tc.level, tc.msg, got)
			}
		})
	}
}
