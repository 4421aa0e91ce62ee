package namesrv

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"

	"rocketraft/protocol"
)

// KVStore holds the name server's KV config (namespace → key → value), the only state the name
// server keeps across restarts. It is persisted as Java's KVConfigSerializeWrapper
// {"configTable":{ns:{k:v}}} to path after every change, by writing a temporary file, syncing
// it and renaming it over the old one, so a crash leaves either the old or the new content.
// An empty path keeps it in memory only. Its mutex is never held together with RouteTable's.
type KVStore struct {
	mu    sync.RWMutex
	path  string
	table map[string]map[string]string
}

type kvFile struct {
	ConfigTable map[string]map[string]string `json:"configTable"`
}

// OpenKVStore loads path (a missing file is an empty store).
func OpenKVStore(path string) (*KVStore, error) {
	s := &KVStore{path: path, table: map[string]map[string]string{}}
	if path == "" {
		return s, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read kv config: %w", err)
	}
	if len(data) == 0 {
		return s, nil
	}
	var f kvFile
	if err := protocol.Decode(data, &f); err != nil {
		return nil, fmt.Errorf("parse kv config %s: %w", path, err)
	}
	for ns, kv := range f.ConfigTable {
		if kv != nil {
			s.table[ns] = kv
		}
	}
	return s, nil
}

// Put sets namespace/key to value and persists.
func (s *KVStore) Put(namespace, key, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	kv := s.table[namespace]
	if kv == nil {
		kv = map[string]string{}
		s.table[namespace] = kv
	}
	kv[key] = value
	return s.persistLocked()
}

// Get returns the value of namespace/key.
func (s *KVStore) Get(namespace, key string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.table[namespace][key]
	return v, ok
}

// Delete removes namespace/key (and the namespace when it becomes empty) and persists.
func (s *KVStore) Delete(namespace, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	kv := s.table[namespace]
	if _, ok := kv[key]; !ok {
		return nil
	}
	delete(kv, key)
	if len(kv) == 0 {
		delete(s.table, namespace)
	}
	return s.persistLocked()
}

// List returns a copy of a namespace, or false when it does not exist.
func (s *KVStore) List(namespace string) (map[string]string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	kv, ok := s.table[namespace]
	if !ok {
		return nil, false
	}
	return maps.Clone(kv), true
}

func (s *KVStore) persistLocked() error {
	if s.path == "" {
		return nil
	}
	data, err := protocol.Encode(kvFile{ConfigTable: s.table})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return fmt.Errorf("persist kv config: %w", err)
	}
	tmp := s.path + ".tmp"
	if err := writeSynced(tmp, data); err != nil {
		return fmt.Errorf("persist kv config: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("persist kv config: %w", err)
	}
	return nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
