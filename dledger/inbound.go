package dledger

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"

	"rocketraft/internal/sendtrace"
	"rocketraft/peerauth"
)

// Inbound RPCs.
//
// hashicorp/raft's NetworkTransport decodes inbound RPCs on its own goroutines and hands them to
// Raft with nothing saying which connection, let alone which authenticated peer, they came on;
// Raft then trusts the node id in each RPC's header. So this node serves inbound connections
// itself, speaking the same wire format (that of hashicorp/raft v1.8's net_transport.go, which
// the peers' NetworkTransports dial): per request a type byte and the msgpack-encoded request
// (an InstallSnapshot's snapshot bytes follow it, Size of them); per answer the error string
// ("" for none) and then the msgpack-encoded response. Before an RPC reaches Raft:
//
//   - with a group secret, the connection has passed the peerauth handshake and every RPC's
//     header id must be the id the peer proved (else an error answer and the connection closes:
//     a member's id cannot be borrowed by a connection that proved another);
//   - whatever the secret, rpcGate (rpcgate.go) refuses terms far ahead of ours and TimeoutNow
//     from anyone but the current leader, and honours a leadership-transfer vote only when it
//     can be one.
//
// Refusals are answered with an error (the peer's transport returns it to Raft, which backs off
// or counts no vote) and logged at most once a second per kind.

// Wire type bytes of hashicorp/raft's NetworkTransport.
const (
	rpcAppendEntries uint8 = iota
	rpcRequestVote
	rpcInstallSnapshot
	rpcTimeoutNow
	rpcRequestPreVote
)

// inboundReadBuffer is the read buffer per inbound connection (as the library's).
const inboundReadBuffer = 256 << 10

// inboundMaxInitLen is the most the decoder allocates for a byte string (an entry's data) or a
// list before it has read the elements. The library's default, 256 KiB of bytes, decodes a
// larger entry in 256 KiB steps, allocating the whole prefix again and copying it at each step:
// a batched entry of 360 KiB (2,048 sends in flight) cost a follower an extra 256 KiB allocation
// and copy, and one of the default batch limit's 4 MiB sixteen allocations and 30 MiB of copies.
// 8 MiB covers a default entry whole (a message larger than the batch limit travels alone, up to
// the 4 MiB message limit plus its record). It also bounds what one frame can make the node
// allocate before sending the bytes: 8 MiB of data, or 64 MiB for a list of entries (8 bytes per
// element), freed when the read fails; with a group secret only members get that far.
const inboundMaxInitLen = 8 << 20

// newInboundDecoder decodes the requests of one inbound connection.
func newInboundDecoder(r io.Reader) *codec.Decoder {
	h := &codec.MsgpackHandle{}
	h.MaxInitLen = inboundMaxInitLen
	return codec.NewDecoder(r, h)
}

// errTransportClosed ends an inbound connection's loop when the node shuts down.
var errTransportClosed = errors.New("dledger: transport closed")

// inbound accepts peer connections and feeds their RPCs to Raft through ch.
type inbound struct {
	s    *streamLayer
	ch   chan raft.RPC
	keys peerauth.KeyFunc // nil: no handshake
	gate *rpcGate
	log  hclog.Logger
	warn *limitedLog
	// handshakes bounds the connections in the handshake, per remote host and in all.
	handshakes peerauth.Limiter
	// heartbeat, when set (benchmarks only, raftTransport.fastPath), runs heartbeats on the
	// connection's goroutine instead of Raft's main loop.
	heartbeat atomic.Pointer[func(raft.RPC)]
	// trace, when set (Config.SendTrace), gets each AppendEntries' milestones on this side.
	trace atomic.Pointer[nodeTrace]
}

func newInbound(s *streamLayer, secret []byte, log hclog.Logger) *inbound {
	in := &inbound{s: s, ch: make(chan raft.RPC), log: log, warn: newLimitedLog(log, time.Second)}
	if secret != nil {
		in.keys = peerauth.SharedKey(secret)
	}
	in.gate = &rpcGate{warn: in.warn}
	return in
}

// run accepts connections until the stream layer closes.
func (in *inbound) run() {
	delay := time.Duration(0)
	for {
		c, err := in.s.acceptConn()
		if err != nil {
			select {
			case <-in.s.closed:
				return
			default:
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			in.log.Error("failed to accept a raft connection", "error", err)
			select {
			case <-in.s.closed:
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		go in.serve(c)
	}
}

// serve authenticates one connection (with a secret) and answers its RPCs in order.
func (in *inbound) serve(c net.Conn) {
	defer c.Close()
	peer := ""
	if in.keys != nil {
		release, ok := in.handshakes.Acquire(c.RemoteAddr())
		if !ok {
			in.warn.Warn("handshakes", "raft connection refused: too many connections in the handshake", "remote", c.RemoteAddr().String())
			return
		}
		id, err := peerauth.Server(c, peerauth.PurposeRaft, in.keys, peerauth.DefaultTimeout)
		release()
		if err != nil {
			if peerauth.IsProbe(err) {
				in.log.Debug("raft connection closed before the handshake", "remote", c.RemoteAddr().String())
			} else {
				in.warn.Warn("handshake", "raft connection refused: the peer did not prove the group secret", "remote", c.RemoteAddr().String(), "error", err)
			}
			return
		}
		peer = id
	}
	r := bufio.NewReaderSize(c, inboundReadBuffer)
	w := bufio.NewWriter(c)
	dec := newInboundDecoder(r)
	mh := &codec.MsgpackHandle{}
	mh.TimeNotBuiltin = true // the library's default encoding of times (msgpackUseNewTimeFormat off)
	enc := codec.NewEncoder(w, mh)
	for {
		var tr appendTrace
		keep, err := in.handle(r, dec, enc, peer, c.RemoteAddr().String(), &tr)
		if err != nil {
			select {
			case <-in.s.closed:
			default:
				if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
					in.warn.Warn("decode", "raft connection closed: bad request", "remote", c.RemoteAddr().String(), "error", err)
				}
			}
			return
		}
		if err := w.Flush(); err != nil || !keep {
			return
		}
		in.trace.Load().appended(&tr)
	}
}

// handle reads one RPC, checks it, hands it to Raft and encodes the answer. keep false: close
// the connection after the answer. With tracing, an AppendEntries carrying entries is marked in
// tr.
func (in *inbound) handle(r *bufio.Reader, dec *codec.Decoder, enc *codec.Encoder, peer, remote string, tr *appendTrace) (keep bool, err error) {
	typ, err := r.ReadByte()
	if err != nil {
		return false, err
	}
	var (
		cmd       any
		zero      any // the response type, answered with a refusal
		hdr       raft.RPCHeader
		reader    io.Reader
		heartbeat bool
	)
	switch typ {
	case rpcAppendEntries:
		req := &raft.AppendEntriesRequest{}
		if err := dec.Decode(req); err != nil {
			return false, fmt.Errorf("decode AppendEntries: %w", err)
		}
		cmd, zero, hdr = req, &raft.AppendEntriesResponse{}, req.RPCHeader
		leader := req.Addr
		if len(leader) == 0 {
			leader = req.Leader
		}
		heartbeat = req.Term != 0 && leader != nil && req.PrevLogEntry == 0 && req.PrevLogTerm == 0 &&
			len(req.Entries) == 0 && req.LeaderCommitIndex == 0
		if n := len(req.Entries); n > 0 && in.trace.Load() != nil {
			tr.Mark(sendtrace.FollowerReceived)
			tr.index = req.Entries[n-1].Index
		}
	case rpcRequestVote:
		req := &raft.RequestVoteRequest{}
		if err := dec.Decode(req); err != nil {
			return false, fmt.Errorf("decode RequestVote: %w", err)
		}
		cmd, zero, hdr = req, &raft.RequestVoteResponse{}, req.RPCHeader
	case rpcRequestPreVote:
		req := &raft.RequestPreVoteRequest{}
		if err := dec.Decode(req); err != nil {
			return false, fmt.Errorf("decode RequestPreVote: %w", err)
		}
		cmd, zero, hdr = req, &raft.RequestPreVoteResponse{}, req.RPCHeader
	case rpcInstallSnapshot:
		req := &raft.InstallSnapshotRequest{}
		if err := dec.Decode(req); err != nil {
			return false, fmt.Errorf("decode InstallSnapshot: %w", err)
		}
		cmd, zero, hdr = req, &raft.InstallSnapshotResponse{}, req.RPCHeader
		reader = io.LimitReader(r, req.Size)
	case rpcTimeoutNow:
		req := &raft.TimeoutNowRequest{}
		if err := dec.Decode(req); err != nil {
			return false, fmt.Errorf("decode TimeoutNow: %w", err)
		}
		cmd, zero, hdr = req, &raft.TimeoutNowResponse{}, req.RPCHeader
	default:
		return false, fmt.Errorf("unknown rpc type %d", typ)
	}

	if peer != "" && string(hdr.ID) != peer {
		in.warn.Warn("identity", "raft RPC refused: its node id is not the one its connection proved", "remote", remote, "proved", peer, "claimed", string(hdr.ID), "rpc", rpcName(typ))
		return false, refuse(enc, zero, fmt.Errorf("node id %q does not match the authenticated peer %q", hdr.ID, peer))
	}
	if err := in.gate.check(cmd, remote); err != nil {
		// A refused snapshot's bytes are still on the wire: close instead of reading them.
		return typ != rpcInstallSnapshot, refuse(enc, zero, err)
	}

	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: cmd, Reader: reader, RespChan: respCh}
	if fn := in.heartbeat.Load(); heartbeat && fn != nil {
		(*fn)(rpc)
	} else {
		select {
		case in.ch <- rpc:
		case <-in.s.closed:
			return false, errTransportClosed
		}
	}
	select {
	case resp := <-respCh:
		msg := ""
		if resp.Error != nil {
			msg = resp.Error.Error()
		}
		if err := enc.Encode(msg); err != nil {
			return false, err
		}
		return true, enc.Encode(resp.Response)
	case <-in.s.closed:
		return false, errTransportClosed
	}
}

// refuse encodes an error answer with an empty response of the request's type.
func refuse(enc *codec.Encoder, zero any, why error) error {
	if err := enc.Encode(why.Error()); err != nil {
		return err
	}
	return enc.Encode(zero)
}

// local hands this node's own Raft an RPC without the network (fast failover's TimeoutNow to
// itself, liveness.go) and waits up to timeout for the answer.
func (in *inbound) local(cmd any, timeout time.Duration) error {
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: cmd, RespChan: respCh}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case in.ch <- rpc:
	case <-in.s.closed:
		return errTransportClosed
	case <-t.C:
		return fmt.Errorf("dledger: raft did not take the local %s within %v", rpcName(rpcTypeOf(cmd)), timeout)
	}
	select {
	case resp := <-respCh:
		return resp.Error
	case <-in.s.closed:
		return errTransportClosed
	case <-t.C:
		return fmt.Errorf("dledger: no answer to the local %s within %v", rpcName(rpcTypeOf(cmd)), timeout)
	}
}

func rpcTypeOf(cmd any) uint8 {
	switch cmd.(type) {
	case *raft.AppendEntriesRequest:
		return rpcAppendEntries
	case *raft.RequestVoteRequest:
		return rpcRequestVote
	case *raft.InstallSnapshotRequest:
		return rpcInstallSnapshot
	case *raft.TimeoutNowRequest:
		return rpcTimeoutNow
	case *raft.RequestPreVoteRequest:
		return rpcRequestPreVote
	}
	return 255
}

func rpcName(t uint8) string {
	switch t {
	case rpcAppendEntries:
		return "AppendEntries"
	case rpcRequestVote:
		return "RequestVote"
	case rpcInstallSnapshot:
		return "InstallSnapshot"
	case rpcTimeoutNow:
		return "TimeoutNow"
	case rpcRequestPreVote:
		return "RequestPreVote"
	}
	return fmt.Sprintf("rpc type %d", t)
}
