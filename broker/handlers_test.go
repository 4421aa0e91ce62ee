package broker

import (
	"testing"

	"rocketraft/remoting"
)

// TestHandlerTable: every entry of the request table has a handler, the sends are the only
// inline codes, and the offset commit and query keep their per-connection order.
func TestHandlerTable(t *testing.T) {
	b := &Broker{}
	table := b.handlers()
	for code, r := range table {
		if r.handle == nil {
			t.Errorf("code %d has no handler", code)
		}
		isSend := code == remoting.SendMessage || code == remoting.SendMessageV2 || code == remoting.SendBatchMessage
		if (r.how == inlineSend) != isSend {
			t.Errorf("code %d: dispatch %d", code, r.how)
		}
	}
	for _, code := range []int32{remoting.QueryConsumerOffset, remoting.UpdateConsumerOffset} {
		if table[code].how != inOrder {
			t.Errorf("code %d is not served in order", code)
		}
	}
	for _, code := range []int32{remoting.PopMessage, remoting.AckMessage, remoting.ChangeMessageInvisibleTime, remoting.BatchAckMessage} {
		if _, ok := table[code]; !ok {
			t.Errorf("POP code %d not in the table", code)
		}
	}
}
