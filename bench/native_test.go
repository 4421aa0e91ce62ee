package bench

import (
	"testing"
	"time"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// TestNativeSendRequest checks the headers and bodies of native send
// requests by parsing them as the broker does.
func TestNativeSendRequest(t *testing.T) {
	for _, batch := range []int{1, 3} {
		cfg := ProduceConfig{Common: Common{Topic: "T"}, Group: "G", Batch: batch}
		single, batchTpl := sendTemplates(&cfg)
		s := &nativeSender{cfg: &cfg, body: []byte("body"), ids: newUniqIDs(), static: "WAIT\x01true\x02",
			batchHead: "WAIT\x01true\x02", single: single, batch: batchTpl}
		before := time.Now().UnixMilli()
		req, err := s.request(nativeQueue{id: 3, idStr: "3"}, batch)
		if err != nil {
			t.Fatal(err)
		}
		var h protocol.SendMessageRequestHeader
		if err := h.FromExtV2(req.Fields()); err != nil {
			t.Fatal(err)
		}
		if h.ProducerGroup != "G" || h.Topic != "T" || h.DefaultTopic != defaultTopic || h.DefaultTopicQueueNums != 4 ||
			h.QueueID != 3 || h.BornTimestamp < before || h.Batch != (batch > 1) {
			t.Errorf("batch %d: header %+v", batch, h)
		}
		var props []string
		if batch == 1 {
			if req.Code != remoting.SendMessageV2 || string(req.Body) != "body" {
				t.Errorf("code %d body %q", req.Code, req.Body)
			}
			props = []string{h.Properties}
		} else {
			if req.Code != remoting.SendBatchMessage {
				t.Errorf("code %d", req.Code)
			}
			entries, err := message.DecodeBatch(req.Body)
			if err != nil || len(entries) != batch {
				t.Fatalf("batch body: %v, %d entries", err, len(entries))
			}
			for _, e := range entries {
				props = append(props, e.Properties)
			}
		}
		seen := map[string]bool{}
		for _, p := range props {
			m := message.ParseProperties(p)
			id := m[message.PropertyUniqClientMessageID]
			if m[message.PropertyWaitStoreMsgOK] != "true" || len(id) != 32 || seen[id] {
				t.Errorf("properties %q", p)
			}
			seen[id] = true
		}
	}
}
