// Package replication runs classic master/slave replication (package ha) for a broker, and its
// use by a DLedger group's leader.
//
//   - ASYNC_MASTER / SYNC_MASTER (classic): the HA server runs on haListenPort for the broker's
//     life. A SYNC_MASTER acknowledges a send only once a slave has stored it (WaitReplicas).
//   - SLAVE (classic, brokerId > 0): the HA client follows the master's HA address
//     (haMasterAddress, else the name servers' REGISTER_BROKER answer, OnRegisterAnswer) and
//     appends what it receives with storage.Store.AppendRaw; the slave refuses sends (the
//     broker's role.go), serves pulls, and copies the master's metadata every SyncInterval
//     (syncLoop).
//   - DLedger: the ready leader runs the HA server while it leads (RoleChanged), so classic
//     slaves registered under the group's brokerName ("legacy slaves") follow the group's
//     commitlog. Replicas are byte-identical, so after a failover a legacy slave resumes on the
//     new leader from its own offset: nothing missing, nothing twice.
//
// The package receives what it needs in Config (the store, the metadata tables, the peer keys,
// a way to re-register and to read routes); it holds no pointer to the broker, so master and
// slave are tested together in one process over two temporary stores.
package replication
