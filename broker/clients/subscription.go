package clients

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/sqlfilter"
)

// ErrUnsupportedExpression is returned by ParseSubscription for expression types other than TAG
// (SQL92 filtering is not implemented).
var ErrUnsupportedExpression = errors.New("clients: unsupported subscription expression type")

// Subscription is the filter a pull is served with: the group's subscription to a topic from the
// last heartbeat, or one parsed from the pull itself.
type Subscription struct {
	Topic, SubString, ExpressionType string
	SubVersion                       int64
	// All is set for "*", an empty expression or a class-filter subscription: every message
	// matches.
	All bool
	// Codes holds the tag codes (Java String.hashCode, sign-extended) of Tags, computed here.
	Codes map[int64]struct{}
	// Tags are the subscribed tags, trimmed, empties and duplicates removed.
	Tags []string
	// SQL is a SQL92 subscription's parsed expression (nil for TAG); ParseErr says why a
	// heartbeat's SQL92 expression could not be parsed (pulls then answer SUBSCRIPTION_PARSE_FAILED).
	SQL      *sqlfilter.Expr
	ParseErr error
}

// Match reports whether a consume-queue unit with tagsCode passes the filter: All, or
// (int32)tagsCode among Codes, as Java compares it. A message without tags has code 0 and so
// matches only All subscriptions.
func (s *Subscription) Match(tagsCode int64) bool {
	if s.All || s.SQL != nil { // SQL92 filters on properties, after the record is read
		return true
	}
	_, ok := s.Codes[int64(int32(tagsCode))]
	return ok
}

// IsTag reports whether the subscription is a tag filter (TAG or unset expression type); other
// types (SQL92) match nothing here and must be refused or filtered by the caller.
func (s *Subscription) IsTag() bool {
	return s.ExpressionType == "" || s.ExpressionType == protocol.ExpressionTag
}

// IsSQL reports whether the subscription is a SQL92 property filter.
func (s *Subscription) IsSQL() bool { return s.ExpressionType == protocol.ExpressionSQL92 }

// MatchProperties applies a SQL92 subscription to a message's properties (true for TAG
// subscriptions, whose filtering happened on the tags code).
func (s *Subscription) MatchProperties(props map[string]string) bool {
	return s.SQL == nil || s.SQL.Match(props)
}

// ParseSubscription builds a subscription from a filter expression carried by a pull (sysFlag
// 0x4): "*" or "" match all; otherwise the expression is split on "||", trimmed and empties
// dropped. Expression types other than TAG (or empty) fail with ErrUnsupportedExpression.
func ParseSubscription(topic, expr, exprType string) (*Subscription, error) {
	if exprType == protocol.ExpressionSQL92 {
		e, err := sqlfilter.Parse(expr)
		if err != nil {
			return nil, err
		}
		return &Subscription{Topic: topic, SubString: expr, ExpressionType: protocol.ExpressionSQL92, SQL: e}, nil
	}
	if exprType != "" && exprType != protocol.ExpressionTag {
		return nil, fmt.Errorf("%w: %s", ErrUnsupportedExpression, exprType)
	}
	s := &Subscription{Topic: topic, SubString: expr, ExpressionType: protocol.ExpressionTag}
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == protocol.SubAll {
		s.All = true
		return s, nil
	}
	s.setTags(strings.Split(expr, "||"))
	return s, nil
}

// fromData builds the server-side view of a heartbeat's SubscriptionData. The client's codeSet
// is ignored; codes come from tagsSet, or from subString when tagsSet is empty.
func fromData(d *protocol.SubscriptionData) *Subscription {
	s := &Subscription{Topic: d.Topic, SubString: d.SubString, ExpressionType: d.ExpressionType, SubVersion: d.SubVersion}
	if s.IsSQL() {
		s.SQL, s.ParseErr = sqlfilter.Parse(d.SubString)
		return s
	}
	if !s.IsTag() {
		return s
	}
	expr := strings.TrimSpace(d.SubString)
	if d.ClassFilterMode || expr == "" || expr == protocol.SubAll {
		s.All = true
		return s
	}
	tags := d.TagsSet
	if len(tags) == 0 {
		tags = strings.Split(expr, "||")
	}
	s.setTags(tags)
	return s
}

func (s *Subscription) setTags(raw []string) {
	s.Codes = make(map[int64]struct{}, len(raw))
	for _, t := range raw {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if slices.Contains(s.Tags, t) {
			continue
		}
		s.Codes[message.TagsCode(t)] = struct{}{}
		s.Tags = append(s.Tags, t)
	}
}

// data renders the subscription back into wire form with recomputed codes (admin bodies).
func (s *Subscription) data() protocol.SubscriptionData {
	d := protocol.SubscriptionData{
		Topic:          s.Topic,
		SubString:      s.SubString,
		ExpressionType: s.ExpressionType,
		SubVersion:     s.SubVersion,
		TagsSet:        append([]string{}, s.Tags...),
		CodeSet:        protocol.CodeSet{},
	}
	for _, t := range s.Tags {
		d.CodeSet = append(d.CodeSet, int32(message.TagsCode(t)))
	}
	return d
}
