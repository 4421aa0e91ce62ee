package proxy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"rocketraft/protocol"
	"rocketraft/proxy/rmqpb"
	"rocketraft/remoting"
)

// Requests to a group's master, and the one retry a failover allows.
//
// A request to a master either certainly did nothing (it never left the proxy: the dial was
// refused or the connection was already closed, remoting.ErrNotSent; or the broker refused it
// with SERVICE_NOT_AVAILABLE, which our brokers answer only before storing anything: a follower
// that could not forward it, a demoted leader, a full disk), or its outcome is unknown (the
// connection broke or the time ran out after it was written). Only the first kind is retried,
// once, at the group's master as the leader book knows it by then (which may mean waiting for
// the name servers to name one): a retry of the second kind could store a message twice without
// the client knowing. The second kind goes back to the client as an in-band error; the clients
// retry it themselves (the same message id), which can store a duplicate, exactly as a client
// talking to the brokers directly would.

// clientMargin is how long before the client's own deadline the proxy answers, so that the
// answer (an error in-band, not a transport timeout) reaches it in time.
const clientMargin = 300 * time.Millisecond

// callResult is the outcome of callMaster.
type callResult struct {
	resp *remoting.Command // nil when err is set
	addr string            // the broker that answered, or the last one tried
	err  error
	// unknown: err came after the request may have reached a broker, which may have acted on it.
	unknown bool
	retried bool // a first attempt certainly did nothing and the request was sent again
}

// budget bounds a call to the brokers: clientMargin before the client's deadline, and at most
// twice SendTimeout (a first attempt and its retry).
func (m *messaging) budget(ctx context.Context) (context.Context, context.CancelFunc) {
	d := time.Now().Add(2 * m.cfg.SendTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-clientMargin).Before(d) {
		d = dl.Add(-clientMargin)
	}
	return context.WithDeadline(ctx, d)
}

// callMaster sends the request build makes to brokerName's master (group of topic) and returns
// the answer; a first attempt that certainly did nothing is made again, once, at the master
// known then. build is called once per attempt (a request is not reused).
func (m *messaging) callMaster(ctx context.Context, topic, brokerName string, timeout time.Duration, build func() *remoting.Command) callResult {
	var res callResult
	for attempt := 0; attempt < 2; attempt++ {
		addr, err := m.masterOf(ctx, topic, brokerName)
		if err != nil {
			if res.err != nil {
				err = fmt.Errorf("%w (after %v)", err, res.err)
			}
			return callResult{addr: res.addr, err: err, retried: res.retried}
		}
		res = callResult{addr: addr, retried: attempt > 0}
		cctx, cancel := ctx, context.CancelFunc(nil)
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > timeout {
			cctx, cancel = context.WithTimeout(ctx, timeout)
		}
		r, err := m.cl.Invoke(cctx, addr, build())
		if cancel != nil {
			cancel()
		}
		if err != nil {
			res.err = fmt.Errorf("%s (%s): %w", brokerName, addr, err)
			if !errors.Is(err, remoting.ErrNotSent) {
				res.unknown = true
				if errors.Is(err, remoting.ErrConnClosed) {
					// The broker's connection broke with the request in hand: forget it as
					// master now, as the client's close hook would a moment later, so the
					// next request asks the name servers instead of racing that hook.
					m.leaders.lost(addr)
				}
				return res
			}
			m.leaders.lost(addr)
			continue
		}
		m.leaders.learn(brokerName, r.Ext(protocol.ExtLeaderAddr))
		if r.Code == remoting.ServiceNotAvailable && r.Ext(protocol.ExtLeaderAddr) == "" {
			// Not the leader, and no leader to forward to yet: nothing was stored.
			m.leaders.notMaster(brokerName, addr)
			res.resp = r
			res.err = fmt.Errorf("%s (%s): code %d %s", brokerName, addr, r.Code, r.Remark)
			continue
		}
		res.resp, res.err = r, nil
		return res
	}
	if res.resp != nil {
		res.err = nil // the last refusal is the answer
	}
	return res
}

// masterOf is brokerName's master ("": the first group of topic's route) as the leader book
// knows it, waiting within ctx while a failover leaves it unknown.
func (m *messaging) masterOf(ctx context.Context, topic, brokerName string) (string, error) {
	r, err := m.routes.get(ctx, topic)
	if err != nil {
		return "", err
	}
	if brokerName == "" {
		for _, bd := range r.BrokerDatas {
			brokerName = bd.BrokerName
			break
		}
	}
	if brokerName == "" {
		return "", fmt.Errorf("topic %s: no broker group in the route", topic)
	}
	return m.leaders.master(ctx, brokerName, routeMaster(r, brokerName))
}

// sendResult is the client's entry for a send whose brokers' outcome is res. Only a broker's
// SUCCESS is a success; an outcome the proxy cannot know is an error the client retries, logged
// with the message id, because that retry may store the message a second time.
func (m *messaging) sendResult(entry *rmqpb.SendResultEntry, topic, brokerName string, res callResult) *rmqpb.SendResultEntry {
	unknown := func(why error) *rmqpb.SendResultEntry {
		m.log.Warn("send outcome unknown: answered an error the client retries, which may store the message twice",
			"topic", topic, "messageId", entry.MessageId, "brokerName", brokerName, "addr", res.addr, "error", why)
		entry.Status = fail(rmqpb.Code_PROXY_TIMEOUT, "send to %s: outcome unknown (the message may be stored; retrying may store it twice): %v", brokerName, why)
		return entry
	}
	switch {
	case res.err != nil && res.unknown:
		return unknown(res.err)
	case res.err != nil:
		entry.Status = fail(rmqpb.Code_HA_NOT_AVAILABLE, "no master of %s took the message: %v", brokerName, res.err)
		return entry
	}
	r := res.resp
	switch r.Code {
	case remoting.Success:
		off, _ := strconv.ParseInt(r.Ext("queueOffset"), 10, 64)
		entry.Status, entry.Offset = ok(), off
	case remoting.SystemError:
		// Our brokers answer SYSTEM_ERROR when a replicated append or a forward did not finish.
		return unknown(fmt.Errorf("%s (%s): code %d %s", brokerName, res.addr, r.Code, r.Remark))
	default:
		entry.Status = fail(sendCode(r.Code), "broker %s (%s): code %d %s", brokerName, res.addr, r.Code, r.Remark)
	}
	return entry
}
