package txn

import (
	"net/netip"
	"reflect"
	"strconv"
	"testing"

	"rocketraft/broker/meta"
	"rocketraft/message"
	"rocketraft/remoting"
)

var host = netip.MustParseAddrPort("10.0.0.7:10911")

// stored is a half message as the store returns it: in the half topic at queue offset 5,
// commitlog offset 900.
func stored() *message.Message {
	return &message.Message{Topic: meta.TransHalfTopic, QueueID: 0, QueueOffset: 5, PhysicalOffset: 900, Body: []byte("pay"),
		BornTimestamp: 1000, StoreTimestamp: 1001, StoreHost: netip.MustParseAddrPort("10.0.0.1:10911"), BornHost: netip.MustParseAddrPort("10.0.0.9:5000"),
		SysFlag: message.TransactionNotType,
		Properties: message.FormatProperties(map[string]string{message.PropertyRealTopic: "Orders", message.PropertyRealQueueID: "2",
			message.PropertyTransactionPrepared: "true", message.PropertyProducerGroup: "PG", message.PropertyUniqClientMessageID: "U1",
			message.PropertyTags: "t"})}
}

func decode(t *testing.T, rec []byte) (*message.Message, map[string]string) {
	t.Helper()
	m, _, err := message.DecodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	return m, message.ParseProperties(m.Properties)
}

// TestCommitRecord: the real message goes back to its topic and queue with COMMIT, the half's
// offset as PREPAREDTRANSACTIONOFFSET and the origin as TRAN_PREPARED_QUEUE_OFFSET, without the
// half-message properties; a half without a usable real topic or queue is an error.
func TestCommitRecord(t *testing.T) {
	rec, err := commitRecord(stored(), 3, host, 2000)
	if err != nil {
		t.Fatal(err)
	}
	m, p := decode(t, rec)
	if m.Topic != "Orders" || m.QueueID != 2 || m.PreparedTransactionOffset != 900 || m.StoreTimestamp != 2000 || m.StoreHost != host ||
		m.SysFlag&message.TransactionTypeMask != message.TransactionCommitType || string(m.Body) != "pay" || m.BornTimestamp != 1000 {
		t.Fatalf("committed %+v", m)
	}
	want := map[string]string{message.PropertyProducerGroup: "PG", message.PropertyUniqClientMessageID: "U1", message.PropertyTags: "t",
		message.PropertyTranPreparedQueueOffset: "3", message.PropertyWaitStoreMsgOK: "false"}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("properties %v, want %v", p, want)
	}
	for _, props := range []map[string]string{
		{message.PropertyRealQueueID: "2"},
		{message.PropertyRealTopic: "Orders"},
		{message.PropertyRealTopic: "Orders", message.PropertyRealQueueID: "-1"},
		{message.PropertyRealTopic: "Orders", message.PropertyRealQueueID: "x"},
	} {
		h := stored()
		h.Properties = message.FormatProperties(props)
		if _, err := commitRecord(h, 0, host, 1); err == nil {
			t.Errorf("%v: no error", props)
		}
	}
}

// TestOpRecord: an op record names the half queue offset in its body, tagged "d", in the op topic.
func TestOpRecord(t *testing.T) {
	rec, err := opRecord(17, host, 3000)
	if err != nil {
		t.Fatal(err)
	}
	m, p := decode(t, rec)
	if m.Topic != meta.TransOpHalfTopic || string(m.Body) != "17" || p[message.PropertyTags] != opTag || p[message.PropertyWaitStoreMsgOK] != "false" ||
		m.BornHost != host || m.StoreHost != host || m.StoreTimestamp != 3000 {
		t.Fatalf("op record %+v %v", m, p)
	}
	if got := parseOpBody(m.Body); !reflect.DeepEqual(got, []int64{17}) {
		t.Fatalf("parsed back %v", got)
	}
}

// TestHalfCopyAndParse: a re-put copy carries the check count and origin, which parseHalf reads
// back with the group, born time and immunity; bad bookkeeping properties are errors.
func TestHalfCopyAndParse(t *testing.T) {
	h := stored()
	h.Properties = message.FormatProperties(map[string]string{message.PropertyRealTopic: "Orders", message.PropertyRealQueueID: "2",
		message.PropertyProducerGroup: "PG", message.PropertyCheckImmunityTime: "30"})
	rec, err := halfCopy(h, meta.TransHalfTopic, 5, 2, host, 4000)
	if err != nil {
		t.Fatal(err)
	}
	m, p := decode(t, rec)
	if m.Topic != meta.TransHalfTopic || m.QueueID != 0 || m.StoreTimestamp != 4000 || p[message.PropertyTransactionCheckTimes] != "2" ||
		p[message.PropertyTranPreparedQueueOffset] != "5" || p[message.PropertyRealTopic] != "Orders" {
		t.Fatalf("copy %+v %v", m, p)
	}
	// As stored at queue offset 8.
	m.QueueOffset, m.PhysicalOffset = 8, 1200
	again, err := message.EncodeRecord(m)
	if err != nil {
		t.Fatal(err)
	}
	v, err := message.ParseView(again)
	if err != nil {
		t.Fatal(err)
	}
	e, err := parseHalf(v)
	if err != nil {
		t.Fatal(err)
	}
	want := halfEntry{offset: 8, phys: 1200, origin: 5, checks: 2, born: 1000, immunity: 30000, group: "PG"}
	if e != want {
		t.Fatalf("parsed %+v, want %+v", e, want)
	}
	for _, bad := range []map[string]string{
		{message.PropertyTranPreparedQueueOffset: "9"}, // after the half itself
		{message.PropertyTranPreparedQueueOffset: "x"},
		{message.PropertyTransactionCheckTimes: "-1"},
	} {
		m.Properties = message.FormatProperties(bad)
		rec, _ := message.EncodeRecord(m)
		v, _ := message.ParseView(rec)
		if _, err := parseHalf(v); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	m.Properties = message.FormatProperties(map[string]string{message.PropertyCheckImmunityTime: "soon"})
	rec, _ = message.EncodeRecord(m)
	v, _ = message.ParseView(rec)
	if e, err := parseHalf(v); err != nil || e.immunity != 0 || e.origin != 8 {
		t.Fatalf("a malformed immunity time is ignored: %+v %v", e, err)
	}
}

// TestCheckHeaderAndBody: CHECK_TRANSACTION_STATE names the copy's offsets, the message id and
// the transaction id (the message id when none is set), and carries the message with its real
// topic and queue.
func TestCheckHeaderAndBody(t *testing.T) {
	h := stored()
	ext := checkHeader(host, h, 8, 1200)
	want := map[string]string{"tranStateTableOffset": "8", "commitLogOffset": "1200", "msgId": "U1", "transactionId": "U1",
		"offsetMsgId": message.OffsetMsgID(host, 1200)}
	if !reflect.DeepEqual(ext, want) {
		t.Fatalf("header %v, want %v", ext, want)
	}
	h.Properties = message.FormatProperties(map[string]string{message.PropertyUniqClientMessageID: "U1", message.PropertyTransactionID: "TX"})
	if ext := checkHeader(host, h, 8, 1200); ext["transactionId"] != "TX" {
		t.Fatalf("transactionId %q", ext["transactionId"])
	}
	body, err := checkBody(stored(), 8, 1200)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := decode(t, body)
	if m.Topic != "Orders" || m.QueueID != 2 || m.QueueOffset != 8 || m.PhysicalOffset != 1200 {
		t.Fatalf("body %+v", m)
	}
	// Without REAL_* the half topic and queue stay.
	h.Properties = ""
	body, _ = checkBody(h, 8, 1200)
	if m, _ := decode(t, body); m.Topic != meta.TransHalfTopic || m.QueueID != 0 {
		t.Fatalf("body without real topic %+v", m)
	}
}

func FuzzParseOpBody(f *testing.F) {
	for _, s := range []string{"12", "1,2,3,", "", "x,4,-1, 5 ", "9223372036854775808"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, n := range parseOpBody(body) {
			if n < 0 {
				t.Fatalf("negative offset %d from %q", n, body)
			}
		}
	})
}

func FuzzParseEndRequest(f *testing.F) {
	f.Add("PG", "3", "400", "8", "true")
	f.Add("", "x", "-1", "4", "maybe")
	f.Fuzz(func(t *testing.T, group, tso, clo, cor, check string) {
		req := remoting.NewRequest(remoting.EndTransaction, map[string]string{"producerGroup": group, "tranStateTableOffset": tso,
			"commitLogOffset": clo, "commitOrRollback": cor, "fromTransactionCheck": check}, nil)
		h, err := ParseEndRequest(req)
		if err != nil {
			return
		}
		if h.ProducerGroup == "" || h.TranStateTableOffset < 0 || h.CommitLogOffset < 0 {
			t.Fatalf("accepted %+v", h)
		}
		switch h.CommitOrRollback {
		case message.TransactionNotType, message.TransactionCommitType, message.TransactionRollbackType:
		default:
			t.Fatalf("accepted commitOrRollback %d", h.CommitOrRollback)
		}
		if n, err := strconv.ParseInt(clo, 10, 64); err != nil || n != h.CommitLogOffset {
			t.Fatalf("commitLogOffset %q read as %d", clo, h.CommitLogOffset)
		}
	})
}
