// Package protocol holds the RocketMQ wire types shared by the name server, the broker and the
// admin tool: the JSON request/response bodies and the typed custom headers carried in a remoting
// command's extFields.
//
// # Why a package of its own
//
// Every body type here is parsed by unmodified RocketMQ clients (the Go client v2 and the Java
// clients 4.x/5.x), so the JSON member names, the presence of members and in a few places the
// exact byte shape are part of the protocol, not a detail. Keeping them in one package with golden
// tests means the name server, the broker and mqadmin cannot drift apart.
//
// # JSON conventions
//
// Java encodes bodies with fastjson 1.x, which differs from standard JSON in two ways that matter:
//
//   - Maps with numeric keys are written with unquoted keys: {"brokerAddrs":{0:"a:1"}}.
//   - Maps keyed by objects (MessageQueue) are written with the object literal as the key:
//     {"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}}.
//
// Encode writes compact standard JSON (numeric keys quoted, no whitespace, no HTML escaping), which
// every client accepts, except for the types that must use fastjson's object-key form because no
// client understands anything else (TopicStatsTable, ConsumeStats, ResetOffsetBody). Those
// implement FastjsonEncoder and Encode uses it.
//
// Decode accepts both forms: a lenient pre-pass (Normalize) rewrites every non-string object key
// (a bare number, true/false, or an object/array literal) into a JSON string, after which the
// standard decoder runs. Types keyed by numbers decode those strings natively; types keyed by
// MessageQueue parse the object literal back out of the string. Always decode through Decode, not
// json.Unmarshal, when the input may come from a Java peer.
//
// Route data (TopicRouteData) has an extra constraint: the Go client splits the text of each
// brokerAddrs object by hand on ',' and ':', so it must be compact, always present ({} when
// empty), and free of whitespace. Encode guarantees all three.
//
// # Custom headers (§1.7)
//
// Each header is a plain struct with ToExt/FromExt. Keys are the Java field names; values are
// decimal strings, "true"/"false", or the string verbatim. FromExt reports a missing required field
// as an error wrapping ErrMissingField that names the field, and an unparsable number as
// ErrBadField; unknown keys are ignored.
package protocol
