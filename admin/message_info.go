package admin

// Decoding and printing of stored messages (§5.4) returned by QUERY_MESSAGE and
// VIEW_MESSAGE_BY_ID.

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"rocketraft/message"
)

// maxShownBase64 bounds the base64 text of a binary body in the labelled view.
const maxShownBase64 = 128

// maxBodyBytes bounds a decompressed body, against zip bombs.
const maxBodyBytes = 64 << 20

// MessageInfo is a stored message in displayable form.
type MessageInfo struct {
	OffsetMsgID     string            `json:"offsetMsgId"`
	UniqKey         string            `json:"msgId,omitempty"`
	Topic           string            `json:"topic"`
	Tags            string            `json:"tags"`
	Keys            string            `json:"keys"`
	QueueID         int32             `json:"queueId"`
	QueueOffset     int64             `json:"queueOffset"`
	CommitLogOffset int64             `json:"commitLogOffset"`
	ReconsumeTimes  int32             `json:"reconsumeTimes"`
	BornTimestamp   int64             `json:"bornTimestamp"`
	StoreTimestamp  int64             `json:"storeTimestamp"`
	BornHost        string            `json:"bornHost"`
	StoreHost       string            `json:"storeHost"`
	SysFlag         int32             `json:"sysFlag"`
	Properties      map[string]string `json:"properties"`
	// Body is the (decompressed) body when it is printable text; otherwise BodyBase64 holds it.
	Body       string `json:"body,omitempty"`
	BodyBase64 string `json:"bodyBase64,omitempty"`
	BodySize   int    `json:"bodySize"`
}

// NewMessageInfo converts a decoded record.
func NewMessageInfo(m *message.Message) MessageInfo {
	props := message.ParseProperties(m.Properties)
	if props == nil {
		props = map[string]string{}
	}
	info := MessageInfo{
		OffsetMsgID:     message.OffsetMsgID(m.StoreHost, m.PhysicalOffset),
		UniqKey:         props[message.PropertyUniqClientMessageID],
		Topic:           m.Topic,
		Tags:            props[message.PropertyTags],
		Keys:            props[message.PropertyKeys],
		QueueID:         m.QueueID,
		QueueOffset:     m.QueueOffset,
		CommitLogOffset: m.PhysicalOffset,
		ReconsumeTimes:  m.ReconsumeTimes,
		BornTimestamp:   m.BornTimestamp,
		StoreTimestamp:  m.StoreTimestamp,
		BornHost:        m.BornHost.String(),
		StoreHost:       m.StoreHost.String(),
		SysFlag:         m.SysFlag,
		Properties:      props,
	}
	body := m.Body
	if m.SysFlag&message.SysFlagCompressed != 0 {
		if d, err := inflate(body); err == nil {
			body = d
		}
	}
	info.BodySize = len(body)
	if printable(body) {
		info.Body = string(body)
	} else {
		info.BodyBase64 = base64.StdEncoding.EncodeToString(body)
	}
	return info
}

func inflate(b []byte) ([]byte, error) {
	r, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, maxBodyBytes))
}

// printable reports whether b is UTF-8 text without control characters other than \t \n \r.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
	}
	return true
}

// printMessage writes one message as labelled lines, like Java's QueryMsgByIdSubCommand.
func (t *Tool) printMessage(m MessageInfo) {
	line := func(label string, v any) { t.printf("%-20s %v\n", label+":", v) }
	line("OffsetID", m.OffsetMsgID)
	if m.UniqKey != "" {
		line("MsgId", m.UniqKey)
	}
	line("Topic", m.Topic)
	line("Tags", "["+m.Tags+"]")
	line("Keys", "["+m.Keys+"]")
	line("Queue ID", m.QueueID)
	line("Queue Offset", m.QueueOffset)
	line("CommitLog Offset", m.CommitLogOffset)
	line("Reconsume Times", m.ReconsumeTimes)
	line("Born Timestamp", t.formatMillis(m.BornTimestamp, "0"))
	line("Store Timestamp", t.formatMillis(m.StoreTimestamp, "0"))
	line("Born Host", m.BornHost)
	line("Store Host", m.StoreHost)
	line("System Flag", m.SysFlag)
	props := make([]string, 0, len(m.Properties))
	for _, k := range slices.Sorted(maps.Keys(m.Properties)) {
		props = append(props, k+"="+m.Properties[k])
	}
	line("Properties", "{"+strings.Join(props, ", ")+"}")
	if b64 := m.BodyBase64; b64 != "" {
		if len(b64) > maxShownBase64 {
			b64 = b64[:maxShownBase64] + "... (-o json shows all)"
		}
		line("Message Body", fmt.Sprintf("(%d bytes, not text; base64) %s", m.BodySize, b64))
	} else {
		line("Message Body", m.Body)
	}
}
