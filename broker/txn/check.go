package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"rocketraft/broker/meta"
	"rocketraft/message"
	"rocketraft/remoting"
)

// errStop ends a check pass early (the store or leadership is gone).
var errStop = errors.New("check pass stopped")

// Run runs a check pass every CheckInterval while this node is the master, until stop closes.
func (s *Service) Run(stop <-chan struct{}) {
	t := time.NewTicker(s.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if s.cfg.IsMaster() {
				s.CheckPass(stop)
			}
		}
	}
}

// CheckPass checks every due half once (see the package comment), stopping early when stop
// closes or this node stops being the master.
func (s *Service) CheckPass(stop <-chan struct{}) {
	if err := s.refresh(); err != nil {
		s.cfg.Logger.Warn("transaction check: cannot read the half queue", "error", err)
		return
	}
	s.mu.Lock()
	due := s.book.due(s.cfg.Now().UnixMilli(), s.cfg.CheckTimeout.Milliseconds())
	s.mu.Unlock()
	if len(due) > maxChecksPerPass {
		due = due[:maxChecksPerPass]
	}
	for _, e := range due {
		select {
		case <-stop:
			return
		default:
		}
		if !s.cfg.IsMaster() {
			return
		}
		if err := s.checkOne(e); err != nil {
			s.cfg.Logger.Warn("transaction check failed", "halfOffset", e.offset, "group", e.group, "error", err)
			if errors.Is(err, errStop) {
				return
			}
		}
	}
}

// checkOne discards, re-puts and checks, or skips one due half.
func (s *Service) checkOne(e halfEntry) error {
	release := s.tryClaim(e.origin)
	if release == nil {
		return nil // an answer for it is being written
	}
	defer release()
	cur, ok, err := s.current(e.origin)
	if err != nil {
		return fmt.Errorf("%w: %w", errStop, err)
	}
	if !ok || cur.offset != e.offset {
		return nil // resolved or re-put meanwhile
	}
	maxChecks := s.cfg.CheckMax
	if cur.group == "" {
		maxChecks = 0 // no PGROUP: no producer can ever be asked
	}
	var conn Producer
	if cur.checks < maxChecks {
		if conn = s.cfg.ProducerConn(cur.group); conn == nil {
			s.cfg.Logger.Debug("transaction check skipped: no live producer of the group", "group", cur.group, "halfOffset", cur.offset)
			return nil
		}
	}
	half, err := s.readHalfAt(cur.phys)
	if err != nil {
		// Removed by retention (or damaged): nothing can resolve it any more.
		s.cfg.Logger.Warn("half message unreadable; dropped from the transaction check", "halfOffset", cur.offset, "error", err)
		s.resolved(cur.offset)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	now, host := s.cfg.Now().UnixMilli(), s.cfg.StoreHost()
	op, err := opRecord(cur.offset, host, now)
	if err != nil {
		return err
	}
	if cur.checks >= maxChecks {
		return s.discard(ctx, cur, half, op, now)
	}
	cp, err := halfCopy(half, meta.TransHalfTopic, cur.origin, cur.checks+1, host, now)
	if err != nil {
		return err
	}
	res, err := s.append(ctx, [][]byte{cp, op})
	if err != nil {
		return fmt.Errorf("%w: re-put half message: %w", errStop, err)
	}
	s.resolved(cur.offset)
	stored, err := s.readHalfAt(res[0].PhysicalOffset)
	if err != nil {
		return fmt.Errorf("read back the re-put half message: %w", err)
	}
	body, err := checkBody(stored, stored.QueueOffset, stored.PhysicalOffset)
	if err != nil {
		return err
	}
	req := remoting.NewRequest(remoting.CheckTransactionState, checkHeader(host, stored, stored.QueueOffset, stored.PhysicalOffset), body)
	if err := conn.InvokeOneway(req); err != nil {
		return fmt.Errorf("send CHECK_TRANSACTION_STATE to %s: %w", conn.RemoteAddr(), err)
	}
	s.cfg.Logger.Info("transaction check-back sent", "group", cur.group, "producer", conn.RemoteAddr(),
		"halfOffset", stored.QueueOffset, "origin", cur.origin, "checks", cur.checks+1)
	return nil
}

// discard gives up on a half checked CheckMax times (or one without PGROUP): a copy goes to
// TRANS_CHECK_MAX_TIME_TOPIC (for an operator) and an op record resolves the half.
func (s *Service) discard(ctx context.Context, cur halfEntry, half *message.Message, op []byte, now int64) error {
	if err := s.cfg.EnsureCheckMaxTopic(); err != nil {
		s.cfg.Logger.Warn("cannot create "+meta.TransCheckMaxTimeTopic, "error", err)
	}
	cp, err := halfCopy(half, meta.TransCheckMaxTimeTopic, cur.origin, cur.checks, s.cfg.StoreHost(), now)
	if err != nil {
		return err
	}
	if _, err := s.append(ctx, [][]byte{cp, op}); err != nil {
		return fmt.Errorf("%w: discard half message: %w", errStop, err)
	}
	s.resolved(cur.offset)
	s.cfg.Logger.Warn("transactional half message discarded: the check-back found no answer", "group", cur.group,
		"halfOffset", cur.offset, "origin", cur.origin, "checks", cur.checks, "max", s.cfg.CheckMax,
		"msgId", message.ParseProperties(half.Properties)[message.PropertyUniqClientMessageID], "movedTo", meta.TransCheckMaxTimeTopic)
	return nil
}
