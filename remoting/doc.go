// Package remoting speaks RocketMQ's remoting protocol: the length-prefixed
// frame that carries every request and response between clients, brokers and
// name servers, with either of its two header encodings.
//
// It knows nothing of topics or storage; the broker and name server register
// one Handler per request code on a Server, and talk to peers through a Client.
//
// Requests are served concurrently by worker goroutines, except codes registered with
// HandleInOrder (one at a time per connection, in arrival order) and with HandleInline (on the
// connection's read goroutine while a predicate says the handler cannot block: a Raft leader's
// sends, which it only queues and answers later through Conn.Defer).
//
// Frame (all integers big-endian):
//
//	offset  size  field
//	0       4     length        bytes that follow this field: 4 + headerLength + bodyLength
//	4       4     headerWord    high byte = serialize type (0 JSON, 1 ROCKETMQ); low 24 bits = headerLength
//	8       H     header        JSON object or ROCKETMQ binary header
//	8+H     B     body          opaque bytes, B = length - 4 - H
//
// ROCKETMQ binary header:
//
//	offset  size  field
//	0       2     code (int16)
//	2       1     language (LanguageCode byte)
//	3       2     version (int16)
//	5       4     opaque
//	9       4     flag          bit 0 = response, bit 1 = oneway
//	13      4     remarkLength  then remark bytes (UTF-8)
//	17+R    4     extLength     then entries: keyLen int16, key, valLen int32, value
//
// A response is written in the serialize type of the request it answers. A
// frame larger than MaxFrameSize, a truncated frame or an undecodable header
// closes that connection with a log line; the server goes on serving others.
package remoting
