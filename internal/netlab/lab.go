package netlab

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// maxHosts is how many host addresses (.1 to .254) a lab's /24 holds.
const maxHosts = 254

// ErrClosed is returned by a Lab's methods after Close: its namespaces are gone.
var ErrClosed = errors.New("netlab: lab is closed")

// Lab is a set of hosts on one bridge, built by New and torn down by Close. Its methods are
// safe for concurrent use.
type Lab struct {
	name  string // "rrlab<pid>x<index>", the prefix of every namespace below
	index int    // third octet of the subnet
	sw    string // switch namespace

	mu      sync.Mutex
	hosts   []*Host
	created []string           // namespaces to delete, in creation order
	ports   []string           // switch-side veth ends to delete
	cuts    map[[2]string]bool // {receiving host, sending host} pairs with a drop rule
	closed  bool
}

// New builds a lab of n hosts and returns once every host can open a TCP connection to every
// other (bounded by readyTimeout), so tests never race the network coming up. On any failure
// it removes whatever it had created and returns the error.
func New(n int) (*Lab, error) {
	if n < 1 || n > maxHosts {
		return nil, fmt.Errorf("netlab: a lab has 1 to %d hosts, not %d", maxHosts, n)
	}
	l, err := claim()
	if err != nil {
		return nil, err
	}
	if err := l.build(n); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, nil
}

// claim picks a free lab index and claims it by creating the switch namespace, both under
// the netns lock, after sweeping labs whose creator died (their indexes become free).
func claim() (*Lab, error) {
	unlock, err := lockLabs()
	if err != nil {
		return nil, err
	}
	defer unlock()
	_ = sweepLocked() // best effort: a stale lab that will not go away just keeps its index
	existing, err := labNamespaces()
	if err != nil {
		return nil, err
	}
	idx, err := freeIndex(existing)
	if err != nil {
		return nil, err
	}
	l := &Lab{name: labName(os.Getpid(), idx), index: idx, cuts: map[[2]string]bool{}}
	l.sw = l.name + "-sw"
	if err := l.addNamespace(l.sw); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, nil
}

// Name is the lab's namespace prefix, "rrlab<pid>x<index>"; useful in test logs.
func (l *Lab) Name() string { return l.name }

// Subnet is the lab's address range in CIDR form, e.g. "10.213.3.0/24".
func (l *Lab) Subnet() string { return fmt.Sprintf("10.213.%d.0/24", l.index) }

// Hosts returns the lab's hosts in order: h0 has the lowest address.
func (l *Lab) Hosts() []*Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Host(nil), l.hosts...)
}

// Close deletes the switch's veth ends (which removes both ends of every pair), then every
// namespace the lab created, newest first. It is idempotent and works on a half-built lab. It
// stops no process: one the caller left running in a host keeps that namespace alive, unnamed
// and without a link, until it exits. A namespace that fails to go is retried by the next
// Close (or a later Sweep).
func (l *Lab) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	var errs []error
	for i := len(l.ports) - 1; i >= 0; i-- {
		if err := ip("-n", l.sw, "link", "del", l.ports[i]); err != nil && nsExists(l.sw) {
			errs = append(errs, err)
		}
	}
	l.ports = nil // deleting the switch namespace destroys any port that failed above
	var left []string
	for i := len(l.created) - 1; i >= 0; i-- {
		ns := l.created[i]
		if err := ip("netns", "del", ns); err != nil && nsExists(ns) {
			errs = append(errs, err)
			left = append([]string{ns}, left...)
		}
	}
	l.created = left
	return errors.Join(errs...)
}
