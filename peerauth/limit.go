package peerauth

import (
	"net"
	"sync"
)

// Default bounds of a Limiter: connections in the handshake from one address, and in all.
const (
	DefaultPendingPerHost = 16
	DefaultPendingTotal   = 1024
)

// Limiter bounds the connections in the handshake at once, per remote host and in all, so a
// flood of connections that never finish it neither piles up goroutines for the handshake's
// deadline nor keeps the members (who connect from their own addresses, a few pooled
// connections each) out.
type Limiter struct {
	PerHost, Total int // 0: the defaults

	mu     sync.Mutex
	byHost map[string]int
	total  int
}

// Acquire reserves a handshake slot for a connection from remote; ok false: over a bound (close
// the connection). Call release once the handshake ends.
func (l *Limiter) Acquire(remote net.Addr) (release func(), ok bool) {
	host := remote.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	per, total := l.PerHost, l.Total
	if per <= 0 {
		per = DefaultPendingPerHost
	}
	if total <= 0 {
		total = DefaultPendingTotal
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byHost == nil {
		l.byHost = map[string]int{}
	}
	if l.total >= total || l.byHost[host] >= per {
		return nil, false
	}
	l.total++
	l.byHost[host]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if l.byHost[host]--; l.byHost[host] <= 0 {
				delete(l.byHost, host)
			}
		})
	}, true
}
