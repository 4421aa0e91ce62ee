package message

import "strings"

// KnownKey is one of the property keys ReadKnown collects; Known.Has holds them as bits.
type KnownKey uint32

// The keys ReadKnown collects: what the send path, the delay scheduler, the metrics and the
// store decide on.
const (
	KnownTags KnownKey = 1 << iota
	KnownKeys
	KnownUniqKey
	KnownWait
	KnownDelay
	KnownTimerDeliverMS
	KnownTimerDelaySec
	KnownTimerDelayMS
	KnownStartDeliverTime
	KnownTransactionPrepared
	KnownShardingKey
	KnownRetryTopic
	KnownCluster
	KnownRealTopic
	KnownRealQueueID
	KnownTimerMask = KnownTimerDeliverMS | KnownTimerDelaySec | KnownTimerDelayMS
)

// Known is what one pass over a properties string found of the keys a broker acts on. Values
// alias the scanned string or bytes. For each key the last valid occurrence wins, as in
// ParseProperties (Java's map puts).
type Known[T string | []byte] struct {
	Has                                         KnownKey
	Tags, Keys, UniqKey, Wait                   T
	Delay, TimerDeliverMS, TimerDelaySec        T
	TimerDelayMS, StartDeliverTime              T
	TransactionPrepared, ShardingKey            T
	RetryTopic, Cluster, RealTopic, RealQueueID T
}

// ReadKnown scans props once and collects the keys of Known. The send path calls it on a
// request's properties, the store on a record's, so both decide from the same rules.
func ReadKnown[T string | []byte](props T) Known[T] {
	var k Known[T]
	eachProperty(props, func(name, v T) bool {
		k.set(name, v)
		return true
	})
	return k
}

// set records one pair (switching on string(name) does not allocate).
func (k *Known[T]) set(name, v T) {
	var bit KnownKey
	switch string(name) {
	case PropertyTags:
		bit, k.Tags = KnownTags, v
	case PropertyKeys:
		bit, k.Keys = KnownKeys, v
	case PropertyUniqClientMessageID:
		bit, k.UniqKey = KnownUniqKey, v
	case PropertyWaitStoreMsgOK:
		bit, k.Wait = KnownWait, v
	case PropertyDelayTimeLevel:
		bit, k.Delay = KnownDelay, v
	case PropertyTimerDeliverMS:
		bit, k.TimerDeliverMS = KnownTimerDeliverMS, v
	case PropertyTimerDelaySec:
		bit, k.TimerDelaySec = KnownTimerDelaySec, v
	case PropertyTimerDelayMS:
		bit, k.TimerDelayMS = KnownTimerDelayMS, v
	case PropertyStartDeliverTime:
		bit, k.StartDeliverTime = KnownStartDeliverTime, v
	case PropertyTransactionPrepared:
		bit, k.TransactionPrepared = KnownTransactionPrepared, v
	case PropertyShardingKey:
		bit, k.ShardingKey = KnownShardingKey, v
	case PropertyRetryTopic:
		bit, k.RetryTopic = KnownRetryTopic, v
	case PropertyCluster:
		bit, k.Cluster = KnownCluster, v
	case PropertyRealTopic:
		bit, k.RealTopic = KnownRealTopic, v
	case PropertyRealQueueID:
		bit, k.RealQueueID = KnownRealQueueID, v
	default:
		return
	}
	k.Has |= bit
}

// WaitStore reports whether the sender waits for the store (WAIT is anything but "false"; no
// WAIT means wait), the rule of the store's SYNC_FLUSH and of SYNC_MASTER's replication wait.
func (k *Known[T]) WaitStore() bool {
	return k.Has&KnownWait == 0 || string(k.Wait) != "false"
}

// TransactionFlag reports whether TRAN_MSG reads as true by Java's Boolean.parseBoolean: "true"
// in any letter case.
func (k *Known[T]) TransactionFlag() bool {
	return k.Has&KnownTransactionPrepared != 0 && strings.EqualFold(string(k.TransactionPrepared), "true")
}
