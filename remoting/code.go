package remoting

// Request codes. Every code the project sends or serves lives here, so the
// broker, name server, admin tool and tests agree on one table. Names follow
// the Java constants (SEND_MESSAGE_V2 → SendMessageV2).
const (
	SendMessage                      int32 = 10
	PullMessage                      int32 = 11
	QueryMessage                     int32 = 12
	QueryConsumerOffset              int32 = 14
	UpdateConsumerOffset             int32 = 15
	UpdateAndCreateTopic             int32 = 17
	GetAllTopicConfig                int32 = 21
	UpdateBrokerConfig               int32 = 25
	GetBrokerConfig                  int32 = 26
	GetBrokerRuntimeInfo             int32 = 28
	SearchOffsetByTimestamp          int32 = 29
	GetMaxOffset                     int32 = 30
	GetMinOffset                     int32 = 31
	GetEarliestMsgStoreTime          int32 = 32
	ViewMessageByID                  int32 = 33
	HeartBeat                        int32 = 34
	UnregisterClient                 int32 = 35
	ConsumerSendMsgBack              int32 = 36
	EndTransaction                   int32 = 37
	GetConsumerListByGroup           int32 = 38
	CheckTransactionState            int32 = 39
	NotifyConsumerIDsChanged         int32 = 40
	LockBatchMQ                      int32 = 41
	UnlockBatchMQ                    int32 = 42
	GetAllConsumerOffset             int32 = 43
	GetAllDelayOffset                int32 = 45
	CheckClientConfig                int32 = 46
	PutKVConfig                      int32 = 100
	GetKVConfig                      int32 = 101
	DeleteKVConfig                   int32 = 102
	RegisterBroker                   int32 = 103
	UnregisterBroker                 int32 = 104
	GetRouteInfoByTopic              int32 = 105
	GetBrokerClusterInfo             int32 = 106
	UpdateAndCreateSubscriptionGroup int32 = 200
	GetAllSubscriptionGroupConfig    int32 = 201
	GetTopicStatsInfo                int32 = 202
	GetConsumerConnectionList        int32 = 203
	GetProducerConnectionList        int32 = 204
	WipeWritePermOfBroker            int32 = 205
	GetAllTopicListFromNameserver    int32 = 206
	DeleteSubscriptionGroup          int32 = 207
	GetConsumeStats                  int32 = 208
	DeleteTopicInBroker              int32 = 215
	DeleteTopicInNamesrv             int32 = 216
	RegisterTopicInNamesrv           int32 = 217
	GetKVListByNamespace             int32 = 219
	ResetConsumerClientOffset        int32 = 220
	GetConsumerStatusFromClient      int32 = 221
	InvokeBrokerToResetOffset        int32 = 222
	InvokeBrokerToGetConsumerStatus  int32 = 223
	GetTopicsByCluster               int32 = 224
	QueryTopicConsumeByWho           int32 = 300
	GetSystemTopicListFromNS         int32 = 304
	GetConsumerRunningInfo           int32 = 307
	ConsumeMessageDirectly           int32 = 309
	SendMessageV2                    int32 = 310
	ViewBrokerStatsData              int32 = 315 // ext statsName, statsKey; body: BrokerStatsData JSON
	SendBatchMessage                 int32 = 320
	QueryDataVersion                 int32 = 322
	SendReplyMessage                 int32 = 324
	SendReplyMessageV2               int32 = 325
	PushReplyMessageToClient         int32 = 326
	AddWritePermOfBroker             int32 = 327
	GetTopicConfig                   int32 = 351 // ext topic; body: the broker's TopicConfig JSON
	GetSubscriptionGroupConfig       int32 = 352 // ext group; body: SubscriptionGroupConfig JSON
	LitePullMessage                  int32 = 361
	BrokerHeartbeat                  int32 = 904
	GetBrokerHAStatus                int32 = 907
)

// Request codes of ours, not RocketMQ's: Raft (DLedger-mode) administration, served by brokers
// and sent by mqadmin. They sit at 32001+, inside int16 so they travel in ROCKETMQ binary headers
// as well as JSON ones (codes above 32767 are JSON-only), and far from every range RocketMQ
// assigns (4.x/5.x stay below ~3100 apart from the POP family at 200050+).
const (
	GetRaftStatus      int32 = 32001 // JSON body: protocol.RaftStatus of the answering node
	TransferRaftLeader int32 = 32002 // ext nodeId ("" = most up-to-date follower); leader only
	AddRaftPeer        int32 = 32003 // ext nodeId, peerAddr; leader only
	RemoveRaftPeer     int32 = 32004 // ext nodeId; leader only
)

// Response codes (RocketMQ ResponseCode / RemotingSysResponseCode). Clients
// react to the number, so a handler must pick the one whose client reaction
// is the one wanted, not merely a plausible name.
const (
	Success                   int32 = 0
	SystemError               int32 = 1
	SystemBusy                int32 = 2
	RequestCodeNotSupported   int32 = 3
	FlushDiskTimeout          int32 = 10
	SlaveNotAvailable         int32 = 11
	FlushSlaveTimeout         int32 = 12
	MessageIllegal            int32 = 13
	ServiceNotAvailable       int32 = 14
	VersionNotSupported       int32 = 15
	NoPermission              int32 = 16
	TopicNotExist             int32 = 17
	TopicExistAlready         int32 = 18
	PullNotFound              int32 = 19
	PullRetryImmediately      int32 = 20
	PullOffsetMoved           int32 = 21
	QueryNotFound             int32 = 22
	SubscriptionParseFailed   int32 = 23
	SubscriptionNotExist      int32 = 24
	SubscriptionNotLatest     int32 = 25
	SubscriptionGroupNotExist int32 = 26
	InvalidParameter          int32 = 29
	ConsumerNotOnline         int32 = 206
	ConsumeMsgTimeout         int32 = 207
	NoMessage                 int32 = 208
	PollingTimeout            int32 = 210 // a POP request arrived after its poll time
	IllegalOperation          int32 = 604
)

// The POP family (RocketMQ 5.x consumption without client-side rebalance), served by brokers and
// sent by the proxy.
const (
	PopMessage                 int32 = 200050
	AckMessage                 int32 = 200051
	ChangeMessageInvisibleTime int32 = 200053
	BatchAckMessage            int32 = 200151 // body: BatchAckMessageRequestBody JSON
)
