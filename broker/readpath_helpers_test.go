package broker

import (
	"errors"
	"path/filepath"
	"testing"

	"rocketraft/broker/internal/storetest"
	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/storage"
)

// readTables are a store, the metadata tables of the read path (pull, POP, query) and a
// configuration, all in temporary directories, for tests that build a read-path type without a
// Broker. The tables hold topic T (two queues) and group G.
type readTables struct {
	t       *testing.T
	cfg     *config.Broker
	st      *storage.Store
	topics  *meta.Topics
	groups  *meta.Groups
	offsets *meta.Offsets
}

func newReadTables(t *testing.T) *readTables {
	t.Helper()
	dir := t.TempDir()
	rt := &readTables{t: t, cfg: config.NewBroker(), st: storetest.Open(t)}
	rt.cfg.BrokerName = "B"
	var errs [3]error
	rt.topics, errs[0] = meta.OpenTopics(filepath.Join(dir, "topics.json"), nil)
	rt.groups, errs[1] = meta.OpenGroups(filepath.Join(dir, "subscriptionGroup.json"), nil)
	rt.offsets, errs[2] = meta.OpenOffsets(filepath.Join(dir, "consumerOffset.json"), nil)
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(rt.topics.Put(topicCfg("T", 2)), rt.groups.Put(protocol.NewSubscriptionGroupConfig("G"))); err != nil {
		t.Fatal(err)
	}
	return rt
}

// acquire hands out the store as a classic place does.
func (rt *readTables) acquire() (*storage.Store, func(), error) { return rt.st, noRelease, nil }

// noStore is an acquire that always fails.
func noStore() (*storage.Store, func(), error) { return nil, nil, errStoreGone }

// put appends one message per props to topic/qid and returns their commitlog offsets.
func (rt *readTables) put(topic string, qid int32, props ...string) []int64 {
	rt.t.Helper()
	var offs []int64
	for _, p := range props {
		res := storetest.Put(rt.t, rt.st, &message.Message{Topic: topic, QueueID: qid, Body: []byte("body"), BornTimestamp: 1, Properties: p})
		offs = append(offs, res.PhysicalOffset)
	}
	return offs
}

// tagged is the properties of a message with tags (and keys, "" for none).
func tagged(tags, keys string) string {
	props := map[string]string{message.PropertyTags: tags}
	if keys != "" {
		props[message.PropertyKeys] = keys
	}
	return message.FormatProperties(props)
}
