package protocol

import (
	"strings"
	"testing"
)

func TestHeartbeatValidateNames(t *testing.T) {
	ok := HeartbeatData{ClientID: "c", ProducerDataSet: []ProducerData{{GroupName: "PG"}},
		ConsumerDataSet: []ConsumerData{{GroupName: "CG", SubscriptionDataSet: []SubscriptionData{{Topic: "T"}, {Topic: "%RETRY%CG"}}}}}
	if err := ok.ValidateNames(); err != nil {
		t.Fatalf("valid heartbeat refused: %v", err)
	}
	for name, hb := range map[string]HeartbeatData{
		"producer group": {ProducerDataSet: []ProducerData{{GroupName: "../../tmp/x"}}},
		"consumer group": {ConsumerDataSet: []ConsumerData{{GroupName: "a\x00b"}}},
		"long group":     {ConsumerDataSet: []ConsumerData{{GroupName: strings.Repeat("g", 10<<10)}}},
		"topic":          {ConsumerDataSet: []ConsumerData{{GroupName: "G", SubscriptionDataSet: []SubscriptionData{{Topic: "%RETRY%../../.."}}}}},
	} {
		if err := hb.ValidateNames(); err == nil {
			t.Errorf("%s: invalid heartbeat accepted", name)
		}
	}
}
