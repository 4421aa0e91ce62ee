package protocol

// HARuntimeInfo is the body of GET_BROKER_HA_STATUS (907): RocketMQ 5.x's HARuntimeInfo, so its
// mqadmin haStatus reads ours. A master (classic, or a DLedger group's ready leader serving
// legacy slaves) fills HAConnectionInfo; a slave fills HAClientRuntimeInfo.
type HARuntimeInfo struct {
	Master                   bool                      `json:"master"`
	MasterCommitLogMaxOffset int64                     `json:"masterCommitLogMaxOffset"`
	InSyncSlaveNums          int                       `json:"inSyncSlaveNums"`
	HAConnectionInfo         []HAConnectionRuntimeInfo `json:"haConnectionInfo"`
	HAClientRuntimeInfo      HAClientRuntimeInfo       `json:"haClientRuntimeInfo"`
}

// HAConnectionRuntimeInfo is one slave connection on a master. Diff is the master's commitlog
// max offset minus the slave's acknowledged offset: how far behind it is, in bytes.
type HAConnectionRuntimeInfo struct {
	Addr                    string `json:"addr"`
	SlaveAckOffset          int64  `json:"slaveAckOffset"`
	Diff                    int64  `json:"diff"`
	InSync                  bool   `json:"inSync"`
	TransferredByteInSecond int64  `json:"transferredByteInSecond"`
	TransferFromWhere       int64  `json:"transferFromWhere"`
}

// HAClientRuntimeInfo is a slave's view: the master it follows (HA address), its own commitlog
// max offset, and (ours) the master offset last seen on the stream.
type HAClientRuntimeInfo struct {
	MasterAddr              string `json:"masterAddr"`
	TransferredByteInSecond int64  `json:"transferredByteInSecond"`
	MaxOffset               int64  `json:"maxOffset"`
	LastReadTimestamp       int64  `json:"lastReadTimestamp"`
	LastWriteTimestamp      int64  `json:"lastWriteTimestamp"`
	MasterFlushOffset       int64  `json:"masterFlushOffset"`
	// IsActivated: connected to the master. Java's field isActivated has the bean getter
	// isActivated(), so fastjson names the property "activated".
	IsActivated bool `json:"activated"`
	// MasterOffset (ours): the highest master offset seen on the stream, -1 before any.
	MasterOffset int64 `json:"masterOffset"`
}
