package message

import (
	"bytes"
	"iter"
	"sort"
	"strings"
	"sync/atomic"
)

// Separators of the properties string (§5.1): every pair is name NameValueSeparator value
// PropertySeparator, the last pair included.
const (
	NameValueSeparator = '\x01'
	PropertySeparator  = '\x02'
)

// MaxPropertiesLength is the largest properties string a record can hold: its length field is a
// signed short.
const MaxPropertiesLength = 32767

// Well-known property keys (§5.2). Names are case-sensitive.
const (
	PropertyTags                    = "TAGS"
	PropertyKeys                    = "KEYS"
	PropertyWaitStoreMsgOK          = "WAIT"
	PropertyDelayTimeLevel          = "DELAY"
	PropertyUniqClientMessageID     = "UNIQ_KEY"
	PropertyRetryTopic              = "RETRY_TOPIC"
	PropertyRealTopic               = "REAL_TOPIC"
	PropertyRealQueueID             = "REAL_QID"
	PropertyTransactionPrepared     = "TRAN_MSG"
	PropertyProducerGroup           = "PGROUP"
	PropertyMinOffset               = "MIN_OFFSET"
	PropertyMaxOffset               = "MAX_OFFSET"
	PropertyOriginMessageID         = "ORIGIN_MESSAGE_ID"
	PropertyReconsumeTime           = "RECONSUME_TIME"
	PropertyMaxReconsumeTimes       = "MAX_RECONSUME_TIMES"
	PropertyConsumeStartTimestamp   = "CONSUME_START_TIME"
	PropertyTranPreparedQueueOffset = "TRAN_PREPARED_QUEUE_OFFSET"
	PropertyTransactionCheckTimes   = "TRANSACTION_CHECK_TIMES"
	PropertyCheckImmunityTime       = "CHECK_IMMUNITY_TIME_IN_SECONDS"
	PropertyTransactionID           = "__transactionId__"
	PropertyMsgRegion               = "MSG_REGION"
	PropertyTraceSwitch             = "TRACE_ON"
	PropertyCluster                 = "CLUSTER"
	PropertyInstanceID              = "INSTANCE_ID"
	PropertyCorrelationID           = "CORRELATION_ID"
	PropertyReplyToClient           = "REPLY_TO_CLIENT"
	PropertyMessageTTL              = "TTL"
	PropertyMessageType             = "MSG_TYPE"
	PropertyShardingKey             = "__SHARDINGKEY"
	PropertyTimerDeliverMS          = "TIMER_DELIVER_MS"
	PropertyTimerDelaySec           = "TIMER_DELAY_SEC"
	PropertyTimerDelayMS            = "TIMER_DELAY_MS"
	PropertyStartDeliverTime        = "__STARTDELIVERTIME"
	PropertyDLQOriginTopic          = "DLQ_ORIGIN_TOPIC"
	PropertyDLQOriginMessageID      = "DLQ_ORIGIN_MESSAGE_ID"
	PropertyBornHost                = "__BORNHOST"
	PropertyCRC32                   = "__CRC32#"
)

// KeySeparator separates the elements of the KEYS property; each element is indexed.
const KeySeparator = " "

// ParseProperties decodes a properties string with Java's rules: split at U+0002, accept a
// segment only if it has a U+0001 preceded by a non-empty name and followed by a non-empty value;
// a later duplicate overwrites an earlier one. It never fails: malformed segments are skipped.
func ParseProperties(s string) map[string]string {
	m := make(map[string]string)
	for k, v := range properties(s) {
		m[k] = v
	}
	return m
}

// properties yields the valid name/value pairs of an encoded properties string in order, by
// ParseProperties' rules (segments without a non-empty name and value are skipped).
func properties(s string) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) { eachProperty(s, yield) }
}

// scans counts full scans of properties strings (see PropertyScans).
var scans atomic.Int64

// PropertyScans is how many times this package has scanned a properties string from its start
// since the process began. Every reader of properties (ParseProperties, PropertyString,
// PropertyValue, ReadKnown) goes through eachProperty, which counts, so a test can prove how
// often one path reads a message's properties.
func PropertyScans() int64 { return scans.Load() }

// eachProperty is the one scanner of a properties string: it calls yield with each valid
// name/value pair in order (a segment needs a U+0001 after a non-empty name and before a
// non-empty value), until yield returns false.
func eachProperty[T string | []byte](s T, yield func(k, v T) bool) {
	scans.Add(1)
	for len(s) > 0 {
		seg := s
		if i := indexByte(s, PropertySeparator); i >= 0 {
			seg, s = s[:i], s[i+1:]
		} else {
			s = s[len(s):]
		}
		i := indexByte(seg, NameValueSeparator)
		if i <= 0 || i == len(seg)-1 {
			continue
		}
		if !yield(seg[:i], seg[i+1:]) {
			return
		}
	}
}

func indexByte[T string | []byte](s T, c byte) int {
	switch v := any(s).(type) {
	case string:
		return strings.IndexByte(v, c)
	case []byte:
		return bytes.IndexByte(v, c)
	}
	panic("unreachable")
}

// FormatProperties encodes m as a properties string with keys sorted, so equal maps give equal
// bytes (the store and Raft replicas compare bytes). Pairs with an empty name or value, or with a
// separator character inside, are skipped because Java parsing would drop or split them.
func FormatProperties(m map[string]string) string {
	keys := make([]string, 0, len(m))
	n := 0
	for k, v := range m {
		if !validPropertyPart(k) || !validPropertyPart(v) {
			continue
		}
		keys = append(keys, k)
		n += len(k) + len(v) + 2
	}
	sort.Strings(keys)
	var b strings.Builder
	b.Grow(n)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(NameValueSeparator)
		b.WriteString(m[k])
		b.WriteByte(PropertySeparator)
	}
	return b.String()
}

func validPropertyPart(s string) bool {
	return s != "" && strings.IndexByte(s, NameValueSeparator) < 0 && strings.IndexByte(s, PropertySeparator) < 0
}

// PropertyString is PropertyValue for properties held as a string (a send's header), with the
// same rules, so the broker's decisions on a send match what the store reads from the record.
func PropertyString(props, key string) (string, bool) {
	val, found := "", false
	for k, v := range properties(props) {
		if k == key {
			val, found = v, true
		}
	}
	return val, found
}

// PropertyValue finds key in an encoded properties string without allocating, with the same
// rules as ParseProperties (the last valid occurrence wins). The store uses it on the append
// path to read TAGS, KEYS, UNIQ_KEY and WAIT.
func PropertyValue(props []byte, key string) ([]byte, bool) {
	var val []byte
	found := false
	eachProperty(props, func(k, v []byte) bool {
		if string(k) == key {
			val, found = v, true
		}
		return true
	})
	return val, found
}
