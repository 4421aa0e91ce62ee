package fsm

// Sequencer is a placeholder until the sequencer lands (merge removes this file).
type Sequencer struct{}

// NewSequencer is a placeholder.
func NewSequencer(next func(topic string, queueID int32) int64) *Sequencer { return &Sequencer{} }

// Invalidate is a placeholder.
func (s *Sequencer) Invalidate() {}
