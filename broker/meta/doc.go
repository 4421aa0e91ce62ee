// Package meta holds the broker's metadata tables — topic configs, subscription groups and
// consumer offsets — each persisted as the JSON file a Java broker writes, so a store directory
// can move between a Java broker and this one in either direction.
//
// # Why a package of its own
//
// These tables are small, change rarely (except offsets) and are replicated as Raft log entries in
// DLedger mode (the broker's tables drive them with the *At methods and ReplaceAll). Keeping them apart from request handling means every mutation is one method call with
// plain inputs and a deterministic result (the *At variants take the time explicitly), and the
// only I/O is the table's own file.
//
// # Files
//
//	config/topics.json            {"topicConfigTable":{...},"dataVersion":{...}}
//	config/subscriptionGroup.json {"subscriptionGroupTable":{...},"forbiddenTable":{},"dataVersion":{...}}
//	config/consumerOffset.json    {"offsetTable":{"<topic>@<group>":{"<queueId>":<offset>,...}}}
//
// Java writes queue-id keys unquoted ({0:12}); reading goes through protocol.Decode, which accepts
// both forms. We always write standard JSON (quoted keys), which Java's fastjson also reads.
//
// # Durability
//
// A save writes <file>.tmp, fsyncs it, links the current <file> to <file>.bak (the previous
// version), renames <file>.tmp over <file> and fsyncs the directory. There is therefore always a
// complete <file> or a complete <file>.bak on disk. Opening reads <file>; if it is missing, empty
// or unparsable it falls back to <file>.bak (and logs that). A corrupt <file> without a usable
// backup is an error wrapping ErrCorrupt rather than a silently empty table.
//
// Topics and Groups save on every mutation (under the table lock, so files are written in
// mutation order), unless SetFlushInterval set a flush interval: then a mutation within that
// interval of the last write is coalesced with the others into one write at the interval's end
// (saver.go), and Flush writes what is pending at shutdown. A failed save leaves the in-memory
// change in place and returns the error (a coalesced write's is logged and retried); the next
// successful save writes the whole table. Offsets are kept in memory and saved by Persist,
// which the broker calls periodically and at shutdown.
//
// # Concurrency
//
// Every method is safe for concurrent use. Getters return copies; callers may modify them.
package meta
