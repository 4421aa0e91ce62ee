package protocol

// Broker request headers for producing and pulling (§2.4, §2.5).

// SendMessageRequestHeader is the header of SEND_MESSAGE (10) and SEND_REPLY_MESSAGE (324) with
// long field names, and of SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320, always V2) and
// SEND_REPLY_MESSAGE_V2 (325) with the single-letter names a..n of SendMessageRequestHeaderV2.
// ToExt/FromExt use the long names; ToExtV2/FromExtV2 the letters.
type SendMessageRequestHeader struct {
	ProducerGroup         string // a, required
	Topic                 string // b, required
	DefaultTopic          string // c, required (TBW102)
	DefaultTopicQueueNums int32  // d, required
	QueueID               int32  // e, required; negative = broker picks
	SysFlag               int32  // f, required
	BornTimestamp         int64  // g, required
	Flag                  int32  // h, required
	Properties            string // i
	ReconsumeTimes        int32  // j
	UnitMode              bool   // k
	MaxReconsumeTimes     *int32 // l; nil = the group's retryMaxTimes
	Batch                 bool   // m
	BrokerName            string // n (bname)
}

// sendHeaderKeys maps each field, in order, to its long and its V2 name.
var sendHeaderKeys = [14][2]string{
	{"producerGroup", "a"}, {"topic", "b"}, {"defaultTopic", "c"}, {"defaultTopicQueueNums", "d"},
	{"queueId", "e"}, {"sysFlag", "f"}, {"bornTimestamp", "g"}, {"flag", "h"}, {"properties", "i"},
	{"reconsumeTimes", "j"}, {"unitMode", "k"}, {"maxReconsumeTimes", "l"}, {"batch", "m"}, {"bname", "n"},
}

// ToExt implements Header with the long (V1) names.
func (h *SendMessageRequestHeader) ToExt() map[string]string { return h.toExt(0) }

// ToExtV2 returns the single-letter (V2) form.
func (h *SendMessageRequestHeader) ToExtV2() map[string]string { return h.toExt(1) }

// FromExt implements Header with the long (V1) names.
func (h *SendMessageRequestHeader) FromExt(ext map[string]string) error { return h.fromExt(ext, 0) }

// FromExtV2 parses the single-letter (V2) form.
func (h *SendMessageRequestHeader) FromExtV2(ext map[string]string) error { return h.fromExt(ext, 1) }

func (h *SendMessageRequestHeader) toExt(form int) map[string]string {
	k := func(i int) string { return sendHeaderKeys[i][form] }
	w := extWriter{}
	w.str(k(0), h.ProducerGroup)
	w.str(k(1), h.Topic)
	w.str(k(2), h.DefaultTopic)
	w.int32(k(3), h.DefaultTopicQueueNums)
	w.int32(k(4), h.QueueID)
	w.int32(k(5), h.SysFlag)
	w.int64(k(6), h.BornTimestamp)
	w.int32(k(7), h.Flag)
	w.optStr(k(8), h.Properties)
	w.int32(k(9), h.ReconsumeTimes)
	w.boolean(k(10), h.UnitMode)
	w.optInt32(k(11), h.MaxReconsumeTimes)
	w.boolean(k(12), h.Batch)
	w.optStr(k(13), h.BrokerName)
	return w
}

func (h *SendMessageRequestHeader) fromExt(ext map[string]string, form int) error {
	var v sendHeaderValues
	for i, names := range sendHeaderKeys {
		if s, ok := ext[names[form]]; ok {
			v.set(i, s)
		}
	}
	return h.fromValues(&v, form)
}

// SendHeaderFields gathers a send header's fields one at a time, as a request whose extFields
// were kept flat yields them (remoting.Command.ExtSeq), for Header to convert: the send path
// reads a header per message, and a map built for that one read cost more than the rest of it.
// Unknown keys are ignored; a key given twice counts once, its last value.
type SendHeaderFields struct {
	v    sendHeaderValues
	form int
}

// NewSendHeaderFields starts a header in the long (SEND_MESSAGE) or the single-letter (v2)
// naming.
func NewSendHeaderFields(v2 bool) SendHeaderFields {
	if v2 {
		return SendHeaderFields{form: 1}
	}
	return SendHeaderFields{}
}

// Set takes one field.
func (f *SendHeaderFields) Set(key, value string) {
	if i := sendHeaderIndex(key, f.form); i >= 0 {
		f.v.set(i, value)
	}
}

// Header converts the fields into h with FromExt's rules and errors.
func (f *SendHeaderFields) Header(h *SendMessageRequestHeader) error {
	return h.fromValues(&f.v, f.form)
}

// sendHeaderValues holds a send header's fields as sent, by sendHeaderKeys index.
type sendHeaderValues struct {
	vals    [len(sendHeaderKeys)]string
	present uint16
}

func (v *sendHeaderValues) set(i int, s string) {
	v.vals[i] = s
	v.present |= 1 << i
}

// sendHeaderIndex is key's index in sendHeaderKeys in the given form, or -1.
func sendHeaderIndex(key string, form int) int {
	if form == 1 {
		if len(key) == 1 && key[0] >= 'a' && int(key[0]-'a') < len(sendHeaderKeys) { // a..n, in order
			return int(key[0] - 'a')
		}
		return -1
	}
	for i, names := range sendHeaderKeys {
		if names[0] == key {
			return i
		}
	}
	return -1
}

// fromValues converts the fields, with FromExt's rules and errors.
func (h *SendMessageRequestHeader) fromValues(v *sendHeaderValues, form int) error {
	k := func(i int) string { return sendHeaderKeys[i][form] }
	r := extReader{send: *v, form: form, fromSend: true}
	*h = SendMessageRequestHeader{
		ProducerGroup:         r.str(k(0), true),
		Topic:                 r.str(k(1), true),
		DefaultTopic:          r.str(k(2), true),
		DefaultTopicQueueNums: r.int32(k(3), true),
		QueueID:               r.int32(k(4), true),
		SysFlag:               r.int32(k(5), true),
		BornTimestamp:         r.int64(k(6), true),
		Flag:                  r.int32(k(7), true),
		Properties:            r.str(k(8), false),
		ReconsumeTimes:        r.int32(k(9), false),
		UnitMode:              r.boolean(k(10), false),
		MaxReconsumeTimes:     r.optInt32(k(11)),
		Batch:                 r.boolean(k(12), false),
		BrokerName:            r.str(k(13), false),
	}
	return r.err
}

// Pull sysFlag bits (PullSysFlag).
const (
	PullCommitOffset int32 = 0x01
	PullSuspend      int32 = 0x02
	PullSubscription int32 = 0x04
	PullClassFilter  int32 = 0x08
	PullLitePull     int32 = 0x10
)

// PullMessageRequestHeader is the header of PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361).
type PullMessageRequestHeader struct {
	ConsumerGroup        string
	Topic                string
	QueueID              int32
	QueueOffset          int64
	MaxMsgNums           int32
	SysFlag              int32
	CommitOffset         int64
	SuspendTimeoutMillis int64
	Subscription         string // only meaningful with PullSubscription
	SubVersion           int64
	ExpressionType       string // TAG (default) or SQL92
	MaxMsgBytes          *int32 // [5.x]
	BrokerName           string // bname [5.x]
}

// ToExt implements Header.
func (h *PullMessageRequestHeader) ToExt() map[string]string {
	w := extWriter{}
	w.str("consumerGroup", h.ConsumerGroup)
	w.str("topic", h.Topic)
	w.int32("queueId", h.QueueID)
	w.int64("queueOffset", h.QueueOffset)
	w.int32("maxMsgNums", h.MaxMsgNums)
	w.int32("sysFlag", h.SysFlag)
	w.int64("commitOffset", h.CommitOffset)
	w.int64("suspendTimeoutMillis", h.SuspendTimeoutMillis)
	w.optStr("subscription", h.Subscription)
	w.int64("subVersion", h.SubVersion)
	w.optStr("expressionType", h.ExpressionType)
	w.optInt32("maxMsgBytes", h.MaxMsgBytes)
	w.optStr("bname", h.BrokerName)
	return w
}

// FromExt implements Header.
func (h *PullMessageRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext}
	*h = PullMessageRequestHeader{
		ConsumerGroup:        r.str("consumerGroup", true),
		Topic:                r.str("topic", true),
		QueueID:              r.int32("queueId", true),
		QueueOffset:          r.int64("queueOffset", true),
		MaxMsgNums:           r.int32("maxMsgNums", true),
		SysFlag:              r.int32("sysFlag", true),
		CommitOffset:         r.int64("commitOffset", true),
		SuspendTimeoutMillis: r.int64("suspendTimeoutMillis", true),
		Subscription:         r.str("subscription", false),
		SubVersion:           r.int64("subVersion", true),
		ExpressionType:       r.str("expressionType", false),
		MaxMsgBytes:          r.optInt32("maxMsgBytes"),
		BrokerName:           r.str("bname", false),
	}
	return r.err
}

// PullMessageResponseHeader is the response header of a pull.
type PullMessageResponseHeader struct {
	SuggestWhichBrokerID int64
	NextBeginOffset      int64
	MinOffset            int64
	MaxOffset            int64
}

// ToExt implements Header.
func (h *PullMessageResponseHeader) ToExt() map[string]string {
	w := extWriter{}
	w.int64("suggestWhichBrokerId", h.SuggestWhichBrokerID)
	w.int64("nextBeginOffset", h.NextBeginOffset)
	w.int64("minOffset", h.MinOffset)
	w.int64("maxOffset", h.MaxOffset)
	return w
}

// FromExt implements Header.
func (h *PullMessageResponseHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext}
	*h = PullMessageResponseHeader{
		SuggestWhichBrokerID: r.int64("suggestWhichBrokerId", true),
		NextBeginOffset:      r.int64("nextBeginOffset", true),
		MinOffset:            r.int64("minOffset", true),
		MaxOffset:            r.int64("maxOffset", true),
	}
	return r.err
}
