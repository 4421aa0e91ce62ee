package message

import "testing"

// knownKeys maps each key ReadKnown collects to its bit and the field holding its value.
func knownKeys[T string | []byte](k *Known[T]) map[string]struct {
	bit KnownKey
	val T
} {
	type kv = struct {
		bit KnownKey
		val T
	}
	return map[string]kv{
		PropertyTags: {KnownTags, k.Tags}, PropertyKeys: {KnownKeys, k.Keys}, PropertyUniqClientMessageID: {KnownUniqKey, k.UniqKey},
		PropertyWaitStoreMsgOK: {KnownWait, k.Wait}, PropertyDelayTimeLevel: {KnownDelay, k.Delay},
		PropertyTimerDeliverMS: {KnownTimerDeliverMS, k.TimerDeliverMS}, PropertyTimerDelaySec: {KnownTimerDelaySec, k.TimerDelaySec},
		PropertyTimerDelayMS: {KnownTimerDelayMS, k.TimerDelayMS}, PropertyStartDeliverTime: {KnownStartDeliverTime, k.StartDeliverTime},
		PropertyTransactionPrepared: {KnownTransactionPrepared, k.TransactionPrepared}, PropertyShardingKey: {KnownShardingKey, k.ShardingKey},
		PropertyRetryTopic: {KnownRetryTopic, k.RetryTopic}, PropertyCluster: {KnownCluster, k.Cluster},
		PropertyRealTopic: {KnownRealTopic, k.RealTopic}, PropertyRealQueueID: {KnownRealQueueID, k.RealQueueID},
	}
}

// checkKnown: ReadKnown over the string and the bytes agrees with ParseProperties on every key
// it collects, in one scan each.
func checkKnown(t *testing.T, props string) {
	t.Helper()
	m := ParseProperties(props)
	before := PropertyScans()
	ks := ReadKnown(props)
	kb := ReadKnown([]byte(props))
	if n := PropertyScans() - before; n != 2 {
		t.Fatalf("%q: %d scans for two ReadKnown calls", props, n)
	}
	bs := knownKeys(&kb)
	for key, e := range knownKeys(&ks) {
		v, ok := m[key]
		if got := ks.Has&e.bit != 0; got != ok || e.val != v {
			t.Fatalf("%q: %s = %q (present %v), ParseProperties %q (present %v)", props, key, e.val, got, v, ok)
		}
		if b := bs[key]; (kb.Has&b.bit != 0) != ok || string(b.val) != v {
			t.Fatalf("%q: bytes %s = %q, ParseProperties %q", props, key, b.val, v)
		}
	}
	if ks.WaitStore() != (m[PropertyWaitStoreMsgOK] != "false") {
		t.Fatalf("%q: WaitStore %v", props, ks.WaitStore())
	}
}

func TestReadKnown(t *testing.T) {
	for _, props := range []string{
		"",
		"TAGS\x01a\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U\x02WAIT\x01false\x02",
		"DELAY\x012\x02DELAY\x013\x02", // the last wins
		"DELAY\x01\x02\x01x\x02DELAY",  // malformed segments
		"TRAN_MSG\x01True\x02CLUSTER\x01c\x02__STARTDELIVERTIME\x011\x02__SHARDINGKEY\x01s\x02",
		"TIMER_DELIVER_MS\x011\x02TIMER_DELAY_SEC\x012\x02TIMER_DELAY_MS\x013\x02RETRY_TOPIC\x01T\x02REAL_TOPIC\x01R\x02REAL_QID\x011",
		"XTAGS\x01a\x02TAGS\x01KEYS\x01b\x02",
	} {
		checkKnown(t, props)
	}
	k := ReadKnown("TRAN_MSG\x01TrUe\x02")
	if !k.TransactionFlag() {
		t.Error("TRAN_MSG=TrUe is true for Java's Boolean.parseBoolean")
	}
	if k := ReadKnown("TRAN_MSG\x01yes\x02"); k.TransactionFlag() {
		t.Error("TRAN_MSG=yes is false for Java's Boolean.parseBoolean")
	}
}

// Every reader of properties counts as one scan.
func TestPropertyScansCountsEveryReader(t *testing.T) {
	props := "TAGS\x01a\x02"
	for name, read := range map[string]func(){
		"ParseProperties": func() { ParseProperties(props) },
		"PropertyString":  func() { PropertyString(props, PropertyTags) },
		"PropertyValue":   func() { PropertyValue([]byte(props), PropertyTags) },
		"ReadKnown":       func() { ReadKnown(props) },
	} {
		before := PropertyScans()
		read()
		if n := PropertyScans() - before; n != 1 {
			t.Errorf("%s: %d scans, want 1", name, n)
		}
	}
}

// The store reads a record's properties without allocating.
func TestReadKnownDoesNotAllocate(t *testing.T) {
	props := []byte("TAGS\x01a\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U\x02WAIT\x01false\x02CLUSTER\x01c\x02")
	if n := testing.AllocsPerRun(100, func() { _ = ReadKnown(props) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// FuzzReadKnown: never panics, and agrees with ParseProperties on every key it collects, over a
// string and over bytes.
func FuzzReadKnown(f *testing.F) {
	f.Add("TAGS\x01a\x02KEYS\x01k\x02")
	f.Add("DELAY\x013\x02TRAN_MSG\x01true\x02")
	f.Add("\x01\x02\x01\x02")
	f.Add("TIMER_DELAY_SEC\x0110\x02__STARTDELIVERTIME\x011")
	f.Add("")
	f.Fuzz(func(t *testing.T, props string) {
		checkKnown(t, props)
	})
}
