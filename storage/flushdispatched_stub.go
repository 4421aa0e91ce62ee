package storage

// FlushDispatched is a placeholder until the storage entry log lands (merge removes this file).
func (s *Store) FlushDispatched() error { return s.flushLogics() }
