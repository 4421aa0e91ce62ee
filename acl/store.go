package acl

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Store holds the current Config of a file and reloads it when the file changes, so accounts
// can be added or revoked without a restart. A file that fails to parse on reload is logged
// and the previous Config stays in force.
type Store struct {
	path   string
	logger hclog.Logger
	cur    atomic.Pointer[Config]
	stamp  fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// OpenStore loads path; an unreadable or invalid file is an error (the server must not start
// with ACL on and no accounts).
func OpenStore(path string, logger hclog.Logger) (*Store, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &Store{path: path, logger: logger}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("ACL file: %w", err)
	}
	c, err := LoadFile(path)
	if err != nil {
		return nil, err
	}
	s.cur.Store(c)
	s.stamp = fileStamp{st.ModTime(), st.Size()}
	return s, nil
}

// Current is the Config in force.
func (s *Store) Current() *Config { return s.cur.Load() }

// Path is the file the store reads.
func (s *Store) Path() string { return s.path }

// Watch polls the file every interval until stop closes and reloads it when its modification
// time or size changes. Run it in its own goroutine.
func (s *Store) Watch(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.reloadIfChanged()
		}
	}
}

func (s *Store) reloadIfChanged() {
	st, err := os.Stat(s.path)
	if err != nil {
		s.logger.Warn("ACL file unreadable, keeping the accounts loaded before", "path", s.path, "error", err)
		return
	}
	stamp := fileStamp{st.ModTime(), st.Size()}
	if stamp == s.stamp {
		return
	}
	s.stamp = stamp
	c, err := LoadFile(s.path)
	if err != nil {
		s.logger.Error("ACL file changed but is invalid, keeping the accounts loaded before", "error", err)
		return
	}
	s.cur.Store(c)
	s.logger.Info("ACL file reloaded", "path", s.path, "accounts", len(c.Accounts))
}
