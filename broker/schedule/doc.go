// Package schedule delivers delayed and timer messages: it walks SCHEDULE_TOPIC_XXXX's queues
// (one per delay level) and hands due messages back to their real topic.
//
// A send whose DELAY property names a level > 0 is stored (by the broker's send path) in
// SCHEDULE_TOPIC_XXXX, queue level-1, with its real topic and queue in REAL_TOPIC / REAL_QID.
// The Scheduler walks each level's queue in order: a message is due at its store time plus the
// level's delay (messageDelayLevel), and since every message of a level has the same delay, the
// queue is in due order and the walk stops at the first message not yet due. Due messages are
// re-encoded for their real topic (DeliveryRecord: DELAY removed, UNIQ_KEY, keys and tags kept,
// new store time) and handed, together with the level's new progress, to the Commit function
// the broker wires for its mode:
//
//   - classic mode: appended to the local store, then the progress table (delayOffset.json) is
//     set and saved. A crash between the two delivers the step again after the restart (at
//     least once, as RocketMQ).
//   - DLedger mode: one fsm.KindScheduleDeliver entry carries the records and the progress
//     range [from, to); every replica applies both in one step, as a compare-and-set on the
//     level's progress (fsm/schedule.go), so a step is applied once whatever happens to its
//     proposer. Only the ready leader delivers (MayDeliver; after its Barrier, so it reads the
//     progress every earlier leader committed); it stops proposing the moment it loses the
//     role. The progress table is a metadata table: part of every snapshot.
//
// Timer messages (5.x TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS) reuse the levels: the
// due time is kept in TIMER_DELIVER_MS and the message waits in the level with the longest delay
// not beyond the remaining time (the shortest level if none, PickLevel); when that level hands it
// out before its due time it is queued again the same way, so it is never delivered early and at
// most one shortest-level delay (1 s by default) late. A DELAY level takes precedence.
//
// The package knows nothing of the broker: it reads the store through Config.Acquire, writes
// through Config.Commit and asks Config.MayDeliver whether this node delivers, so it is tested
// over a store in a temporary directory with a fake clock.
package schedule
