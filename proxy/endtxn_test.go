package proxy

import (
	"context"
	"net/netip"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/types/known/durationpb"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/proxy/rmqpb"
	"rocketraft/remoting"
)

// txnBroker extends fakeBroker with SEND_MESSAGE_V2 and END_TRANSACTION: sends are answered
// as stored at commitlog offset 4242, queue offset 7; END_TRANSACTION answers pop from
// endAnswers (SUCCESS when empty).
type txnBroker struct {
	*fakeBroker
	mu         sync.Mutex
	sends      []protocol.SendMessageRequestHeader
	ends       []map[string]string
	endAnswers []*remoting.Command
}

func startTxnBroker(t *testing.T) (*txnBroker, *messaging) {
	t.Helper()
	f := &txnBroker{fakeBroker: startFakeBroker(t)}
	f.srv.Handle(remoting.SendMessageV2, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		var h protocol.SendMessageRequestHeader
		if err := h.FromExtV2(req.ExtFields); err != nil {
			return req.NewResponse(remoting.SystemError, err.Error())
		}
		f.mu.Lock()
		f.sends = append(f.sends, h)
		f.mu.Unlock()
		resp := req.NewResponse(remoting.Success, "")
		resp.ExtFields = map[string]string{"msgId": message.OffsetMsgID(netip.MustParseAddrPort("127.0.0.1:10911"), 4242), "queueOffset": "7", "queueId": "0"}
		return resp
	})
	f.srv.Handle(remoting.EndTransaction, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.ends = append(f.ends, req.ExtFields)
		if len(f.endAnswers) > 0 {
			a := f.endAnswers[0]
			f.endAnswers = f.endAnswers[1:]
			return req.NewResponse(a.Code, a.Remark)
		}
		return req.NewResponse(remoting.Success, "")
	})
	cfg := DefaultConfig()
	cfg.NamesrvAddr = f.srv.Addr()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m := &messaging{cfg: &cfg, log: hclog.NewNullLogger(), clients: newClientRegistry()}
	m.cl = remoting.NewClient(remoting.ClientConfig{})
	t.Cleanup(func() { m.cl.Close() })
	m.leaders = newLeaderBook(&cfg, m.cl, hclog.NewNullLogger())
	m.routes = newRouteCache(&cfg, m.cl, m.leaders)
	return f, m
}

// TestSendTransactionAndEnd: a TRANSACTION message goes to the broker as a half message (TRAN_MSG,
// PGROUP = topic, the prepared sysFlag bit, the immunity time) and is answered with a
// transaction id naming its group and offsets; EndTransaction with that id sends
// END_TRANSACTION with those offsets (fromTransactionCheck for a check-back's answer), retries
// a refusal (no leader yet) and reports a half the broker cannot match as an invalid id.
func TestSendTransactionAndEnd(t *testing.T) {
	f, m := startTxnBroker(t)
	ctx := context.Background()
	msg := &rmqpb.Message{Topic: &rmqpb.Resource{Name: "T"}, Body: []byte("x"), SystemProperties: &rmqpb.SystemProperties{
		MessageId: "ID1", MessageType: rmqpb.MessageType_TRANSACTION, OrphanedTransactionRecoveryDuration: durationpb.New(5e9)}}
	resp, err := m.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{msg}})
	if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Fatalf("send: %v %v", resp.GetStatus(), err)
	}
	txid := resp.GetEntries()[0].GetTransactionId()
	if txid != "t1:7:4242:b1" {
		t.Fatalf("transaction id %q, want t1:7:4242:b1", txid)
	}
	f.mu.Lock()
	h := f.sends[0]
	f.mu.Unlock()
	props := message.ParseProperties(h.Properties)
	if h.SysFlag&message.TransactionPreparedType == 0 || props[message.PropertyTransactionPrepared] != "true" ||
		props[message.PropertyProducerGroup] != "T" || props[message.PropertyCheckImmunityTime] != "5" || h.ProducerGroup != "T" {
		t.Fatalf("half message header sysFlag %d, properties %v, group %q", h.SysFlag, props, h.ProducerGroup)
	}

	end := func(res rmqpb.TransactionResolution, src rmqpb.TransactionSource) rmqpb.Code {
		r, err := m.EndTransaction(ctx, &rmqpb.EndTransactionRequest{Topic: &rmqpb.Resource{Name: "T"}, MessageId: "ID1",
			TransactionId: txid, Resolution: res, Source: src})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetStatus().GetCode()
	}
	if c := end(rmqpb.TransactionResolution_COMMIT, rmqpb.TransactionSource_SOURCE_SERVER_CHECK); c != rmqpb.Code_OK {
		t.Fatalf("commit: %v", c)
	}
	f.mu.Lock()
	got := f.ends[0]
	f.endAnswers = []*remoting.Command{{Code: remoting.ServiceNotAvailable, Remark: "no leader"}}
	f.mu.Unlock()
	want := map[string]string{"producerGroup": "T", "tranStateTableOffset": "7", "commitLogOffset": "4242",
		"commitOrRollback": "8", "fromTransactionCheck": "true", "msgId": "ID1", "transactionId": txid}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("END_TRANSACTION header %s = %q, want %q (%v)", k, got[k], v, got)
		}
	}
	if c := end(rmqpb.TransactionResolution_ROLLBACK, rmqpb.TransactionSource_SOURCE_CLIENT); c != rmqpb.Code_OK {
		t.Fatalf("rollback after one refusal: %v", c)
	}
	f.mu.Lock()
	if n := len(f.ends); n != 3 || f.ends[2]["commitOrRollback"] != "12" || f.ends[2]["fromTransactionCheck"] != "false" {
		t.Fatalf("END_TRANSACTIONs %v, want the rollback tried twice", f.ends)
	}
	f.endAnswers = []*remoting.Command{{Code: remoting.SystemError, Remark: "The producer group wrong: the half message belongs to \"U\""}}
	f.mu.Unlock()
	if c := end(rmqpb.TransactionResolution_COMMIT, rmqpb.TransactionSource_SOURCE_CLIENT); c != rmqpb.Code_INVALID_TRANSACTION_ID {
		t.Fatalf("commit of a half of another group: %v, want INVALID_TRANSACTION_ID", c)
	}
}
