package protocol

import (
	"fmt"

	"rocketraft/message"
)

// ValidateNames checks every group and topic name a heartbeat carries with the validators the
// admin commands use (package message): producer groups, consumer groups (whose %RETRY% topics
// the broker creates) and subscribed topics. The broker and the proxy's remoting listener refuse
// a heartbeat that fails, so no such name reaches a client table or the metadata files.
func (hb *HeartbeatData) ValidateNames() error {
	for i := range hb.ProducerDataSet {
		if err := message.ValidateGroup(hb.ProducerDataSet[i].GroupName); err != nil {
			return fmt.Errorf("producer %d: %w", i, err)
		}
	}
	for i := range hb.ConsumerDataSet {
		cd := &hb.ConsumerDataSet[i]
		if err := message.ValidateConsumerGroup(cd.GroupName); err != nil {
			return fmt.Errorf("consumer %d: %w", i, err)
		}
		for j := range cd.SubscriptionDataSet {
			if err := message.ValidateTopic(cd.SubscriptionDataSet[j].Topic); err != nil {
				return fmt.Errorf("consumer %d (group %s) subscription %d: %w", i, cd.GroupName, j, err)
			}
		}
	}
	return nil
}
