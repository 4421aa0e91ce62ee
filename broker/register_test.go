package broker

import (
	"fmt"
	"testing"
	"time"

	"rocketraft/protocol"
)

// A small table registers as plain JSON; a table whose JSON is over compressRegisterAbove (or
// any table with compressedRegister) in the compressed layout the name server decodes, with
// every topic in it.
func TestRegistrationBodyCompression(t *testing.T) {
	b := metaBroker(t, t.TempDir())
	b.reg = testRegistrar(t, b.cfg, nil)
	b.reg.topics = b.topics
	if _, err := b.topics.EnsureTopics([]*protocol.TopicConfig{protocol.NewTopicConfig("Small")}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, compressed := b.reg.body(); compressed {
		t.Fatal("a one-topic table was compressed")
	}
	b.cfg.CompressedRegister = true
	body, compressed := b.reg.body()
	if !compressed {
		t.Fatal("compressedRegister=true sent plain")
	}
	if rb, err := protocol.DecodeCompressedRegisterBrokerBody(body); err != nil || rb.TopicConfigSerializeWrapper.TopicConfigTable["Small"] == nil {
		t.Fatalf("decode: %v", err)
	}
	b.cfg.CompressedRegister = false
	var tcs []*protocol.TopicConfig
	for i := 0; i < 20000; i++ {
		tcs = append(tcs, protocol.NewTopicConfig(fmt.Sprintf("Topic_%05d", i)))
	}
	if _, err := b.topics.EnsureTopics(tcs, time.Now()); err != nil {
		t.Fatal(err)
	}
	body, compressed = b.reg.body()
	if !compressed {
		t.Fatalf("a %d-topic table was sent plain", len(tcs))
	}
	rb, err := protocol.DecodeCompressedRegisterBrokerBody(body)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rb.TopicConfigSerializeWrapper.TopicConfigTable); n != len(tcs)+1 {
		t.Fatalf("decoded %d topics, want %d", n, len(tcs)+1)
	}
	plain := protocol.MustEncode(protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: b.topics.Wrapper()})
	t.Logf("%d topics: %d bytes of JSON, %d compressed", len(tcs)+1, len(plain), len(body))
}
