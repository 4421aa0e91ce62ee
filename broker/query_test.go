package broker

import (
	"strconv"
	"testing"

	"rocketraft/message"
	"rocketraft/remoting"
)

// queryReq is a QUERY_MESSAGE over all time.
func queryReq(topic, key string, maxNum int, uniq bool) *remoting.Command {
	ext := map[string]string{"topic": topic, "key": key, "maxNum": strconv.Itoa(maxNum),
		"beginTimestamp": "0", "endTimestamp": "9223372036854775807"}
	if uniq {
		ext["_UNIQUE_KEY_QUERY"] = "true"
	}
	return remoting.NewRequest(remoting.QueryMessage, ext, nil)
}

// TestQueryMessage: a key lookup answers only the records whose keys (or unique key) really
// match, in stored layout; nothing found, a bad header and an unreadable store each answer
// their code.
func TestQueryMessage(t *testing.T) {
	rt := newReadTables(t)
	uniq := message.FormatProperties(map[string]string{message.PropertyUniqClientMessageID: "U1"})
	rt.put("T", 0, tagged("a", "k1 k2"), tagged("a", "k3"), uniq)
	rt.put("T2", 0, tagged("a", "k2"))
	q := &queryHandlers{acquire: rt.acquire}

	for _, tc := range []struct {
		name      string
		req       *remoting.Command
		wantCode  int32
		wantCount int
	}{
		{"second key", queryReq("T", "k2", 10, false), remoting.Success, 1},
		{"other key", queryReq("T", "k3", 10, false), remoting.Success, 1},
		{"unique key", queryReq("T", "U1", 10, true), remoting.Success, 1},
		{"unique key as a key", queryReq("T", "U1", 10, false), remoting.Success, 1},
		{"a key taken for a unique key", queryReq("T", "k1", 10, true), remoting.QueryNotFound, 0},
		{"unknown key", queryReq("T", "nope", 10, false), remoting.QueryNotFound, 0},
		{"no key", queryReq("T", "", 10, false), remoting.SystemError, 0},
		{"bad maxNum", remoting.NewRequest(remoting.QueryMessage, map[string]string{"topic": "T", "key": "k1", "maxNum": "x",
			"beginTimestamp": "0", "endTimestamp": "1"}, nil), remoting.SystemError, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := q.handleQueryMessage(nil, tc.req)
			if resp.Code != tc.wantCode {
				t.Fatalf("code %d (%s), want %d", resp.Code, resp.Remark, tc.wantCode)
			}
			msgs, err := message.DecodeRecords(resp.Body)
			if err != nil || len(msgs) != tc.wantCount {
				t.Fatalf("%d messages (%v), want %d", len(msgs), err, tc.wantCount)
			}
			for _, m := range msgs {
				if m.Topic != "T" {
					t.Fatalf("a message of %s", m.Topic)
				}
			}
			if resp.Code == remoting.Success && resp.Ext("indexLastUpdatePhyoffset") == "" {
				t.Fatal("no index position in the answer")
			}
		})
	}
	q.acquire = noStore
	if resp := q.handleQueryMessage(nil, queryReq("T", "k1", 10, false)); resp.Code != remoting.ServiceNotAvailable {
		t.Fatalf("no store: code %d", resp.Code)
	}
}

// TestViewMessageByID: the record at a commitlog offset, or the failure's code.
func TestViewMessageByID(t *testing.T) {
	rt := newReadTables(t)
	offs := rt.put("T", 0, tagged("a", ""), tagged("b", ""))
	q := &queryHandlers{acquire: rt.acquire}
	view := func(off string) *remoting.Command {
		return q.handleViewMessageByID(nil, remoting.NewRequest(remoting.ViewMessageByID, map[string]string{"offset": off}, nil))
	}
	resp := view(strconv.FormatInt(offs[1], 10))
	if resp.Code != remoting.Success {
		t.Fatalf("code %d (%s)", resp.Code, resp.Remark)
	}
	m, _, err := message.DecodeRecord(resp.Body)
	if err != nil || m.QueueOffset != 1 || physicalOffsetOf(resp.Body) != offs[1] {
		t.Fatalf("viewed %+v (%v)", m, err)
	}
	if resp := view("123456789"); resp.Code != remoting.SystemError {
		t.Fatalf("past the end: code %d", resp.Code)
	}
	if resp := view("x"); resp.Code != remoting.SystemError {
		t.Fatalf("bad offset: code %d", resp.Code)
	}
	q.acquire = noStore
	if resp := view("0"); resp.Code != remoting.ServiceNotAvailable {
		t.Fatalf("no store: code %d", resp.Code)
	}
	if physicalOffsetOf([]byte{1}) != 0 {
		t.Fatal("a short record has an offset")
	}
}
