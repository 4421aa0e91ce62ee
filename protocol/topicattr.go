package protocol

// Topic attributes (RocketMQ 5.x): a topic config's Attributes map, changed by the
// UPDATE_AND_CREATE_TOPIC header "attributes", a comma separated list of modifications
// "+key=value" (add or replace) and "-key" (delete), as `mqadmin updateTopic -a` sends it. The
// map stores the keys without the sign. This broker knows one attribute, message.type, which
// tells the 5.x proxy which message types a topic accepts.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// AttrMessageType is the topic attribute naming the message types a topic accepts.
const AttrMessageType = "message.type"

// Values of AttrMessageType (RocketMQ's TopicMessageType).
const (
	MessageTypeUnspecified = "UNSPECIFIED"
	MessageTypeNormal      = "NORMAL"
	MessageTypeFIFO        = "FIFO"
	MessageTypeDelay       = "DELAY"
	MessageTypeTransaction = "TRANSACTION"
	MessageTypeMixed       = "MIXED"
)

// messageTypes are the values AttrMessageType may take.
var messageTypes = []string{MessageTypeUnspecified, MessageTypeNormal, MessageTypeFIFO, MessageTypeDelay, MessageTypeTransaction, MessageTypeMixed}

// topicAttributes maps every attribute key this broker accepts to its allowed values.
var topicAttributes = map[string][]string{AttrMessageType: messageTypes}

// TopicMessageType is the topic's message.type attribute, "" when it has none.
func (t *TopicConfig) TopicMessageType() string {
	if t == nil {
		return ""
	}
	return t.Attributes[AttrMessageType]
}

// AlterTopicAttributes applies the modification list mods ("+k=v,-k") to current (not changed)
// and returns the new map (nil when empty). On a topic being created (create) only additions are
// allowed, and deleting a key the topic lacks is an error, as RocketMQ's broker answers. Unknown
// keys and values outside an attribute's set are errors naming them.
func AlterTopicAttributes(current map[string]string, mods string, create bool) (map[string]string, error) {
	out := maps.Clone(current)
	if out == nil {
		out = map[string]string{}
	}
	if strings.TrimSpace(mods) == "" {
		return nilIfEmpty(out), nil
	}
	seen := map[string]bool{}
	for _, kv := range strings.Split(mods, ",") {
		kv = strings.TrimSpace(kv)
		if len(kv) < 2 || (kv[0] != '+' && kv[0] != '-') {
			return nil, fmt.Errorf("attribute %q: want +key=value or -key", kv)
		}
		op, rest := kv[0], kv[1:]
		key, value, hasValue := strings.Cut(rest, "=")
		switch {
		case op == '+' && !hasValue:
			return nil, fmt.Errorf("attribute %q: an addition needs =value", kv)
		case op == '-' && hasValue:
			return nil, fmt.Errorf("attribute %q: a deletion takes no value", kv)
		case key == "" || strings.ContainsAny(key, "+-"):
			return nil, fmt.Errorf("attribute %q: bad key", kv)
		case seen[key]:
			return nil, fmt.Errorf("attribute key %s given twice", key)
		}
		seen[key] = true
		allowed, known := topicAttributes[key]
		if !known {
			return nil, fmt.Errorf("unsupported attribute key: %s (this broker knows %s)", key, strings.Join(slices.Sorted(maps.Keys(topicAttributes)), ", "))
		}
		if op == '-' {
			if create {
				return nil, fmt.Errorf("only additions are allowed when creating a topic, not -%s", key)
			}
			if _, ok := out[key]; !ok {
				return nil, fmt.Errorf("attempt to delete a nonexistent attribute: %s", key)
			}
			delete(out, key)
			continue
		}
		if !slices.Contains(allowed, value) {
			return nil, fmt.Errorf("attribute %s: value %q is not one of %s", key, value, strings.Join(allowed, ", "))
		}
		out[key] = value
	}
	return nilIfEmpty(out), nil
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// FormatTopicAttributes renders attributes as the "+k=v,..." list that recreates them (sorted).
func FormatTopicAttributes(attrs map[string]string) string {
	parts := make([]string, 0, len(attrs))
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		parts = append(parts, "+"+k+"="+attrs[k])
	}
	return strings.Join(parts, ",")
}
