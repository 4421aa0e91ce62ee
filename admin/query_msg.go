package admin

// queryMsgByKey: the topic's route, then QUERY_MESSAGE (12; header topic, key, maxNum,
// beginTimestamp, endTimestamp, _UNIQUE_KEY_QUERY=false) to every master, as Java does. A broker
// answering QUERY_NOT_FOUND contributes nothing. The index matches hashes only, so returned
// messages are re-checked: one of their KEYS must equal the key.
//
// queryMsgById: the offset message id (§5.9) encodes the store host and commitlog offset;
// VIEW_MESSAGE_BY_ID (33, header offset) goes straight to that address.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"rocketraft/message"
	"rocketraft/remoting"
)

// DefaultQueryMaxNum is QUERY_MESSAGE's maxNum when none is given (the broker caps it at 64).
const DefaultQueryMaxNum = 64

// QueryMsgByKey returns topic's messages whose KEYS contain key, stored between begin and end
// (ms; end 0 means now), at most maxNum per broker, ordered by store time.
func (t *Tool) QueryMsgByKey(ctx context.Context, topic, key string, maxNum int, begin, end int64) ([]MessageInfo, error) {
	if end <= 0 {
		end = time.Now().UnixMilli()
	}
	if maxNum <= 0 {
		maxNum = DefaultQueryMaxNum
	}
	all, err := t.queryIndex(ctx, topic, key, false, maxNum, begin, end)
	out := all[:0]
	for _, info := range all { // the index matches key hashes: keep the messages whose KEYS hold key
		if slices.Contains(strings.Fields(info.Keys), key) {
			out = append(out, info)
		}
	}
	return out, err
}

// QueryMsgByID fetches the message with the given offset message id from the broker that stored it.
func (t *Tool) QueryMsgByID(ctx context.Context, offsetMsgID string) (*MessageInfo, error) {
	host, off, err := message.ParseOffsetMsgID(strings.TrimSpace(offsetMsgID))
	if err != nil {
		return nil, usagef("%v", err)
	}
	addr := host.String()
	m, err := t.viewMessage(ctx, addr, off)
	if err != nil {
		var re *ResponseError
		if errors.As(err, &re) {
			return nil, fmt.Errorf("view message %s: %w", offsetMsgID, err)
		}
		// The storing broker is unreachable. In a DLedger group every member holds the same
		// commitlog, so any member can answer: try every registered broker and keep the record
		// the id names (same store host and commitlog offset).
		if alt := t.viewMessageElsewhere(ctx, addr, off); alt != nil {
			m, err = alt, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("view message %s: %w", offsetMsgID, err)
	}
	info := NewMessageInfo(m)
	return &info, nil
}

func (t *Tool) viewMessage(ctx context.Context, addr string, off int64) (*message.Message, error) {
	resp, err := t.call(ctx, addr, remoting.ViewMessageByID, map[string]string{"offset": strconv.FormatInt(off, 10)}, nil)
	if err != nil {
		return nil, err
	}
	m, _, err := message.DecodeRecord(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("decode message from %s: %w", addr, err)
	}
	return m, nil
}

// viewMessageElsewhere asks every registered broker but storeHost for the record at off and
// returns the one stored by storeHost, or nil.
func (t *Tool) viewMessageElsewhere(ctx context.Context, storeHost string, off int64) *message.Message {
	ci, err := t.ClusterInfo(ctx)
	if err != nil {
		return nil
	}
	all, _ := ClusterBrokers(ci, "", false)
	for _, b := range all {
		if b.Addr == storeHost {
			continue
		}
		if m, err := t.viewMessage(ctx, b.Addr, off); err == nil && m.StoreHost.String() == storeHost && m.PhysicalOffset == off {
			t.warnf("%s did not answer; the message was read from %s (%s brokerId %d), which holds a replica", storeHost, b.Addr, b.BrokerName, b.ID)
			return m
		}
	}
	return nil
}

var queryMsgByKeyCommand = &command{
	name:    "queryMsgByKey",
	summary: "Find a topic's messages by key",
	args:    "-t <topic> -k <key> [-b beginMs] [-e endMs] [-c maxNum] [--detail]",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var topic, key string
		var begin, end int64
		var maxNum int
		var detail bool
		fs.StringVarP(&topic, "topic", "t", "", "topic name")
		fs.StringVarP(&key, "msgKey", "k", "", "message key")
		fs.Int64VarP(&begin, "beginTimestamp", "b", 0, "earliest store time, ms since the epoch")
		fs.Int64VarP(&end, "endTimestamp", "e", 0, "latest store time, ms since the epoch (0: now)")
		fs.IntVarP(&maxNum, "maxNum", "c", DefaultQueryMaxNum, "most messages per broker")
		fs.BoolVar(&detail, "detail", false, "print every field of each message instead of a table")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "topic", "msgKey"); err != nil {
				return err
			}
			msgs, err := t.QueryMsgByKey(ctx, topic, key, maxNum, begin, end)
			if err != nil {
				return err
			}
			if t.jsonOut() {
				if msgs == nil {
					msgs = []MessageInfo{}
				}
				return t.printJSON(msgs)
			}
			if len(msgs) == 0 {
				return fmt.Errorf("%w: no message of topic %s with key %s", ErrNotFound, topic, key)
			}
			if detail {
				for i, m := range msgs {
					if i > 0 {
						t.printf("\n")
					}
					t.printMessage(m)
				}
				return nil
			}
			tb := newTable("#Message ID", "#QID", "#Offset", "#Tags", "#Keys", "#Store Time")
			for _, m := range msgs {
				tb.add(m.OffsetMsgID, m.QueueID, m.QueueOffset, m.Tags, m.Keys, t.formatMillis(m.StoreTimestamp, ""))
			}
			return tb.write(t.cfg.Out)
		}
	},
}

var queryMsgByIDCommand = &command{
	name:    "queryMsgById",
	summary: "Show a message by its offset message id, where it was stored and which consumer groups consumed it",
	args:    "-i <offsetMsgId>",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var id string
		fs.StringVarP(&id, "msgId", "i", "", "offset message id (32 or 56 hex digits)")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "msgId"); err != nil {
				return err
			}
			m, err := t.QueryMsgByID(ctx, id)
			if err != nil {
				return err
			}
			// The trace (message_track.go): where it was stored and which groups consumed it. A
			// failure there still shows the message.
			tr, err := t.TraceMessage(ctx, *m)
			if err != nil {
				t.warnf("cannot tell which groups consumed the message: %v", err)
			}
			if t.jsonOut() {
				return t.printJSON(tr)
			}
			t.printMessage(*m)
			t.printTrace(tr)
			return nil
		}
	},
}
