package proxy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// Forwarding 4.x clients' broker requests to the right group's master.
//
// Writes (sends, sends-back, offset updates, END_TRANSACTION) go through callMaster
// (failover.go): one more attempt only when the first certainly did nothing; an outcome the
// proxy cannot know is answered SYSTEM_ERROR, never SUCCESS, so the client treats the send as
// failed and retries it itself (possibly storing a duplicate, as when talking to brokers
// directly). Pulls, which store nothing, are sent asynchronously (no proxy goroutine waits on
// a long poll) and sent again at the group's new master when the connection to the old one
// breaks while they wait.

// maxPullAttempts bounds how often one pull is sent again after a connection broke.
const maxPullAttempts = 3

// behindRetry is how long the answer to a pull that reached a node behind the consumer waits, so
// that the client's next pull finds the node caught up or the new master known.
const behindRetry = 100 * time.Millisecond

// behind reports whether resp, a PULL_OFFSET_MOVED answer to req, would move the consumer back:
// the node's next offset is below the one the consumer asked for.
func behind(req, resp *remoting.Command) bool {
	want, err1 := strconv.ParseInt(req.Ext("queueOffset"), 10, 64)
	next, err2 := strconv.ParseInt(resp.Ext("nextBeginOffset"), 10, 64)
	return err1 == nil && err2 == nil && next < want
}

// groupOf is the broker group req is for: its bname header (n in SEND_MESSAGE_V2's short
// names), or the only group of the cluster.
func (f *front4) groupOf(req *remoting.Command) (string, error) {
	if b := req.Ext("bname"); b != "" {
		return b, nil
	}
	if req.Code == remoting.SendMessageV2 || req.Code == remoting.SendBatchMessage {
		if b := req.Ext("n"); b != "" {
			return b, nil
		}
	}
	return f.onlyGroup()
}

// onlyGroup is the cluster's group when it has exactly one.
func (f *front4) onlyGroup() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.SendTimeout)
	defer cancel()
	names, _, err := f.cluster.get(ctx)
	if err != nil {
		return "", err
	}
	if len(names) != 1 {
		return "", fmt.Errorf("the request names no broker group (bname) and the cluster has %d", len(names))
	}
	return names[0], nil
}

// call sends req on to group bname's master through callMaster and turns the outcome into the
// client's answer.
func (f *front4) call(req *remoting.Command, bname string) *remoting.Command {
	ctx, cancel := f.ctx()
	defer cancel()
	res := f.m.callMaster(ctx, bname, bname, f.timeoutOf(), func() *remoting.Command { return clone(req) })
	switch {
	case res.err != nil && res.unknown:
		f.log.Warn("4.x request outcome unknown: answered an error the client may retry",
			"code", req.Code, "brokerName", bname, "addr", res.addr, "error", res.err)
		return req.NewResponse(remoting.SystemError, fmt.Sprintf("proxy: %s: outcome unknown (the request may have taken effect): %v", bname, res.err))
	case res.err != nil:
		return req.NewResponse(remoting.ServiceNotAvailable, fmt.Sprintf("proxy: no master of %s took the request: %v", bname, res.err))
	}
	return answerOf(req, res.resp)
}

// handleToGroup forwards a request whose header names its group.
func (f *front4) handleToGroup(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	bname, err := f.groupOf(req)
	if err != nil {
		return req.NewResponse(remoting.SystemError, "proxy: "+err.Error())
	}
	if req.IsOneway() {
		f.oneway(req, bname)
		return nil
	}
	return f.call(req, bname)
}

// oneway passes a oneway request (the 4.x clients persist offsets so, and SendOneWay sends so)
// on as oneway, as the client meant it: nothing waits for the broker, so a client's offset
// updates do not queue behind each other's replication, and the broker takes them in the order
// the proxy's connection carries them. Only a request that certainly did not leave (no
// connection to the master) is sent again, once, to the next master.
func (f *front4) oneway(req *remoting.Command, bname string) {
	ctx, cancel := f.ctx()
	defer cancel()
	for attempt := 0; attempt < 2; attempt++ {
		addr, err := f.m.masterOf(ctx, bname, bname)
		if err != nil {
			f.log.Debug("4.x oneway request dropped: no master", "code", req.Code, "brokerName", bname, "error", err)
			return
		}
		err = f.m.cl.InvokeOneway(ctx, addr, clone(req))
		if err == nil {
			return
		}
		f.log.Debug("4.x oneway request not sent", "code", req.Code, "brokerName", bname, "addr", addr, "error", err)
		f.m.leaders.lost(addr)
	}
}

// handleEndTransaction forwards END_TRANSACTION to the group that holds the half message: the
// one the header names, or, for the answer to a check-back (the client names none), the group
// whose check-back it answers.
func (f *front4) handleEndTransaction(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	bname := req.Ext("bname")
	if bname == "" {
		bname = f.clients.txnGroup(req.Ext("msgId"), req.Ext("transactionId"))
	}
	if bname == "" {
		var err error
		if bname, err = f.onlyGroup(); err != nil {
			return req.NewResponse(remoting.SystemError, "proxy: END_TRANSACTION: "+err.Error())
		}
	}
	return f.call(req, bname)
}

// handleLock forwards LOCK_BATCH_MQ / UNLOCK_BATCH_MQ to the group of the queues in its body
// (a 4.x client sends one request per group).
func (f *front4) handleLock(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body protocol.LockBatchRequestBody
	if err := protocol.Decode(req.Body, &body); err != nil {
		return req.NewResponse(remoting.SystemError, "proxy: bad lock body: "+err.Error())
	}
	bname := ""
	for _, mq := range body.MqSet {
		if mq.BrokerName != "" {
			bname = mq.BrokerName
			break
		}
	}
	if bname == "" {
		var err error
		if bname, err = f.onlyGroup(); err != nil {
			return req.NewResponse(remoting.SystemError, "proxy: "+err.Error())
		}
	}
	return f.call(req, bname)
}

// handleAnyGroup forwards a request every group answers alike (the proxy heartbeats each
// client to every group) to the first group.
func (f *front4) handleAnyGroup(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.SendTimeout)
	names, _, err := f.cluster.get(ctx)
	cancel()
	if err != nil || len(names) == 0 {
		return req.NewResponse(remoting.SystemError, fmt.Sprintf("proxy: no broker group known: %v", err))
	}
	var last *remoting.Command
	for _, name := range names {
		last = f.call(req, name)
		if last.Code == remoting.Success {
			return last
		}
	}
	return last
}

// maxPullSuspend caps a 4.x client's suspendTimeoutMillis, as the broker does.
const maxPullSuspend = 60 * time.Second

// handlePull sends a pull to the group's master without waiting for it: the answer goes back
// from the connection's read goroutine when the broker gives it.
func (f *front4) handlePull(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	bname, err := f.groupOf(req)
	if err != nil {
		return req.NewResponse(remoting.SystemError, "proxy: "+err.Error())
	}
	// Capped as the broker caps it (broker/longpoll), so a client cannot hold the proxy's
	// call (and its deadline) open for weeks.
	suspend := maxPullSuspend
	if ms := req.ExtInt64Or("suspendTimeoutMillis", 0); ms < int64(maxPullSuspend/time.Millisecond) {
		suspend = time.Duration(max(ms, 0)) * time.Millisecond
	}
	deadline := time.Now().Add(suspend + f.cfg.SendTimeout)
	f.pullAt(conn.Defer(req), req, bname, deadline, 1)
	return nil
}

// pullAt makes attempt number attempt of a pull.
func (f *front4) pullAt(d *remoting.Deferred, req *remoting.Command, bname string, deadline time.Time, attempt int) {
	fail := func(code int32, err error) {
		f.log.Warn("4.x pull answered an error", "brokerName", bname, "attempt", attempt, "error", err)
		d.Answer(func() *remoting.Command { return req.NewResponse(code, "proxy: pull from "+bname+": "+err.Error()) })
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	addr, err := f.m.masterOf(ctx, bname, bname)
	if err != nil {
		fail(remoting.ServiceNotAvailable, err)
		return
	}
	retry := func(err error) bool {
		if attempt >= maxPullAttempts || time.Now().After(deadline) {
			return false
		}
		f.m.leaders.lost(addr)
		go f.pullAt(d, req, bname, deadline, attempt+1)
		return true
	}
	err = f.m.cl.InvokeAsync(ctx, addr, clone(req), deadline, func(resp *remoting.Command, err error) {
		if err != nil {
			if errors.Is(err, remoting.ErrConnClosed) && retry(err) {
				return
			}
			fail(remoting.SystemError, err)
			return
		}
		switch resp.Code {
		case remoting.Success, remoting.PullNotFound, remoting.PullRetryImmediately:
		case remoting.PullOffsetMoved:
			if behind(req, resp) && f.clients.recentlyMoved(bname) {
				// Shortly after a failover, a node behind the client (a follower standing in for
				// the master, still catching up): its "offset moved" would send the client's
				// offset back, and the client would commit that. The client asks again shortly.
				// Outside that window the answer is passed on (the queue really is shorter).
				f.log.Info("4.x pull: a node behind the consumer's offset answered; the client asks again",
					"brokerName", bname, "addr", addr, "queueOffset", req.Ext("queueOffset"), "nodeMaxOffset", resp.Ext("maxOffset"))
				out := answerOf(req, resp)
				out.Code, out.Remark = remoting.PullNotFound, "proxy: the node asked is behind; asking again"
				out.ExtFields["nextBeginOffset"] = req.Ext("queueOffset")
				time.AfterFunc(behindRetry, func() { d.Answer(func() *remoting.Command { return out }) })
				return
			}
		case remoting.SubscriptionNotExist:
			// A new master that has not had the consumer's heartbeat yet (heartbeatFollower
			// sends it within moments): send it now, then the pull again.
			if attempt < maxPullAttempts && time.Now().Before(deadline) {
				go func() {
					f.reheartbeat(req.Ext("consumerGroup"), addr)
					f.pullAt(d, req, bname, deadline, attempt+1)
				}()
				return
			}
			fallthrough
		default:
			f.log.Warn("4.x pull: the broker refused it", "brokerName", bname, "addr", addr, "code", resp.Code, "remark", resp.Remark)
		}
		d.Answer(func() *remoting.Command { return answerOf(req, resp) })
	})
	if err != nil && !retry(err) {
		fail(remoting.ServiceNotAvailable, err)
	}
}

// fanOut sends req to every group's master at once and returns each group's answer (nil where
// none came) with the last error.
func (f *front4) fanOut(req *remoting.Command) (map[string]*remoting.Command, error) {
	ctx, cancel := f.ctx()
	defer cancel()
	names, table, err := f.cluster.get(ctx)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[string]*remoting.Command{}
	var lastErr error
	for _, name := range names {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			resp, addr, err := f.toMaster(ctx, name, table[name], req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				lastErr = err
				return
			}
			out[name] = resp
			f.clients.sent(name, addr, req.Code)
		}(name)
	}
	wg.Wait()
	return out, lastErr
}

// toMaster sends a copy of req to group name's master (fallback: the master the cluster table
// lists), once more at the next master when the first attempt certainly did nothing.
func (f *front4) toMaster(ctx context.Context, name, fallback string, req *remoting.Command) (*remoting.Command, string, error) {
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		var addr string
		if addr, err = f.m.leaders.master(ctx, name, fallback); err != nil {
			return nil, "", err
		}
		var resp *remoting.Command
		if resp, err = f.m.cl.Invoke(ctx, addr, clone(req)); err == nil {
			return resp, addr, nil
		}
		err = fmt.Errorf("%s (%s): %w", name, addr, err)
		if !errors.Is(err, remoting.ErrNotSent) {
			break
		}
		f.m.leaders.lost(addr)
	}
	return nil, "", err
}

// handleQueryMessage asks every group for the messages of a key and answers with all found.
func (f *front4) handleQueryMessage(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	answers, err := f.fanOut(req)
	var found *remoting.Command
	var body []byte
	for _, resp := range answers {
		if resp.Code == remoting.Success {
			if found == nil || resp.Ext("indexLastUpdateTimestamp") > found.Ext("indexLastUpdateTimestamp") {
				found = resp
			}
			body = append(body, resp.Body...)
		}
	}
	if found == nil {
		for _, resp := range answers {
			return answerOf(req, resp)
		}
		return req.NewResponse(remoting.SystemError, fmt.Sprintf("proxy: no broker group answered: %v", err))
	}
	out := answerOf(req, found)
	out.Body = body
	return out
}

// handleViewMessage asks every group for the message at a commit log offset and answers with
// one that has it (a 4.x client normally asks the broker its offset message id names).
func (f *front4) handleViewMessage(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	answers, err := f.fanOut(req)
	var last *remoting.Command
	for _, resp := range answers {
		if resp.Code == remoting.Success {
			return answerOf(req, resp)
		}
		last = resp
	}
	if last != nil {
		return answerOf(req, last)
	}
	return req.NewResponse(remoting.SystemError, fmt.Sprintf("proxy: no broker group answered: %v", err))
}
