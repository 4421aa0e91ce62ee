// Package clients tracks who is connected to the broker: producer groups, consumer groups with
// their subscriptions, and the per-group queue locks of orderly consumers.
//
// # Why a package of its own
//
// This state is broker-local and soft: it is rebuilt from client
// heartbeats every 30 s, is never persisted and is not replicated. Keeping it apart from request
// handling lets the membership rules — who is a member, when the members must be told to
// rebalance — be tested without a store or a network.
//
// # Membership
//
// A group member is a client id. Each member remembers the connection it last heartbeated on; a
// heartbeat from the same client id on a new connection replaces the old connection (the member
// set is unchanged). A member leaves on UNREGISTER_CLIENT, when its connection closes
// (ConnClosed) or when it has not heartbeated for ChannelExpiry (ScanExpired). An empty group is
// forgotten, subscriptions included, as Java does.
//
// When a consumer group's member set changes, or a heartbeat adds or removes a subscribed topic,
// every remaining member is sent NOTIFY_CONSUMER_IDS_CHANGED once for that change. Notifications
// are sent after the manager's lock is released, so a slow or re-entrant Notify cannot block
// heartbeats.
//
// # Subscriptions
//
// Pulls normally carry no subscription; the broker filters them by the group's subscription from
// the last heartbeat. Tag codes are recomputed here from the tag strings with message.TagsCode
// (Java String.hashCode) because the Go client hashes UTF-8 bytes and sends codes as strings.
// As in Java, a heartbeat replaces an existing topic's subscription only if its subVersion is
// newer, so members with stale configurations do not flap the filter.
//
// # Locks
//
// LOCK_BATCH_MQ / UNLOCK_BATCH_MQ keep a per-group table queue → (client id, last lock time). A
// lock is taken if the queue is free, already held by the same client, or the holder's lock is
// older than LockExpiry (60 s); taking or re-taking it refreshes the time.
//
// # Lock ordering
//
// Manager.mu (members) and Manager.lockMu (queue locks) are never held together. No lock is held
// while calling Notify or any remoting method.
package clients
