package remoting

import (
	"fmt"
	"iter"
	"slices"
)

// A request's extFields arrive as a JSON object and are usually read as a map (ExtFields). A
// send is read once, field by field, into a typed header, and on a broker taking tens of
// thousands of sends a second the map built for that one read (its allocations and hashing)
// cost about a tenth of the leader's CPU. So a server can name the request codes whose
// extFields stay a flat list in wire order (ServerConfig.FlatExtCodes), and a client can keep
// its responses' flat (ClientConfig.FlatExtResponses); a command being built can be given
// fields with AppendExt the same way. Such a command has a nil ExtFields until something asks
// for the map: Ext, ExtInt64, ExtSeq and the rest read the list, Encode writes it, and Fields
// builds the map (and keeps it) for code that wants one. Code that handles those codes reads
// fields through these methods, never through ExtFields directly.

// extField is one extFields entry of a command kept flat.
type extField struct{ key, value string }

// flatRule is which decoded commands keep their extFields flat: requests with one of codes,
// every response when responses is set.
type flatRule struct {
	codes     []int32
	responses bool
}

// mayKeep is whether extFields met while parsing a header are parsed flat: the code is read
// before extFields by every client this broker knows; without it they become a map.
func (r flatRule) mayKeep(codeSeen bool, code int32) bool {
	return r.responses || (codeSeen && slices.Contains(r.codes, code))
}

// keeps is whether the whole command, its flag read too, stays flat.
func (r flatRule) keeps(c *Command) bool {
	if c.IsResponse() {
		return r.responses
	}
	return slices.Contains(r.codes, c.Code)
}

// AppendExt adds a field to a command being built, in the flat list while the command has no
// map: an answer or request whose fields are written once and encoded (the send path's answer,
// a load generator's requests) costs no map. A key already in the list is not replaced: both
// are sent and the peer keeps the later, as it does a repeated JSON key (SetExt replaces). On a
// command that has its map already it sets the map.
func (c *Command) AppendExt(key, value string) {
	if c.ExtFields != nil {
		c.ExtFields[key] = value
		return
	}
	if c.flatExt == nil {
		c.flatExt = make([]extField, 0, 8)
	}
	c.flatExt = append(c.flatExt, extField{key: key, value: value})
}

// extCount is how many fields the command would encode.
func (c *Command) extCount() int { return len(c.flatExt) + len(c.ExtFields) }

// Fields returns the extFields map, building it first for a command kept flat (and keeping it:
// later reads and changes go to the map), or an empty one for a command without fields: the
// map to read or change. Code that may see a flat command and wants the map calls Fields
// rather than reading ExtFields (a signer above all, whose signature must cover every field).
func (c *Command) Fields() map[string]string {
	if c.flatExt == nil {
		if c.ExtFields == nil {
			c.ExtFields = map[string]string{}
		}
		return c.ExtFields
	}
	m := make(map[string]string, len(c.flatExt)+len(c.ExtFields))
	for _, f := range c.flatExt {
		m[f.key] = f.value
	}
	for k, v := range c.ExtFields { // set directly on a flat command: those win
		m[k] = v
	}
	c.ExtFields, c.flatExt = m, nil
	return m
}

// ExtSeq yields the extFields: a flat list in wire order, then the map (the fields set on a
// flat command without Fields). A key can come more than once, a peer's repeated key or a map
// entry over a flat one; its last value is the one meant, as a map keeps it, so a reader that
// keeps the last value per key (a typed header) reads what Fields would hold. Encode writes
// the fields in this order too.
func (c *Command) ExtSeq() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, f := range c.flatExt {
			if !yield(f.key, f.value) {
				return
			}
		}
		for k, v := range c.ExtFields {
			if !yield(k, v) {
				return
			}
		}
	}
}

// lookupExt returns one extFields entry and whether it is present, from the map or the list.
func (c *Command) lookupExt(key string) (string, bool) {
	if v, ok := c.ExtFields[key]; ok || c.flatExt == nil {
		return v, ok
	}
	for i := len(c.flatExt) - 1; i >= 0; i-- { // the last of a repeated key, as a map keeps it
		if c.flatExt[i].key == key {
			return c.flatExt[i].value, true
		}
	}
	return "", false
}

// extForLog renders the extFields for a log line without building the map on the command.
func (c *Command) extForLog() string {
	if c.flatExt == nil {
		return fmt.Sprint(c.ExtFields)
	}
	m := make(map[string]string, len(c.flatExt))
	for k, v := range c.ExtSeq() {
		m[k] = v
	}
	return fmt.Sprint(m)
}
