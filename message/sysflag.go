package message

// Message sysFlag bits (§5.3, MessageSysFlag). The broker owns the final value: it takes the
// client's flag and sets MultiTags and the IPv6 bits itself.
const (
	SysFlagCompressed   int32 = 0x1
	SysFlagMultiTags    int32 = 0x2
	SysFlagBornHostV6   int32 = 0x10
	SysFlagStoreHostV6  int32 = 0x20
	SysFlagNeedUnwrap   int32 = 0x40
	SysFlagInnerBatch   int32 = 0x80
	SysFlagCompressMask int32 = 0x700

	// TransactionTypeMask covers bits 2-3, the transaction type.
	TransactionTypeMask int32 = 0xC
	// TransactionNotType marks an ordinary message (and stored half messages).
	TransactionNotType int32 = 0x0
	// TransactionPreparedType marks a prepared (half) message: not dispatched to consume queues.
	TransactionPreparedType int32 = 0x4
	// TransactionCommitType marks the committed copy of a transactional message.
	TransactionCommitType int32 = 0x8
	// TransactionRollbackType marks a rolled-back message: neither dispatched nor indexed.
	TransactionRollbackType int32 = 0xC
)

// TransactionType extracts the transaction type bits of sysFlag.
func TransactionType(sysFlag int32) int32 { return sysFlag & TransactionTypeMask }

// ResetTransactionType returns sysFlag with its transaction type replaced by typ.
func ResetTransactionType(sysFlag, typ int32) int32 {
	return sysFlag&^TransactionTypeMask | typ&TransactionTypeMask
}

// IsDispatchable reports whether a record with this sysFlag gets a consume-queue unit (and a
// queue offset): PREPARED and ROLLBACK records do not.
func IsDispatchable(sysFlag int32) bool {
	t := TransactionType(sysFlag)
	return t == TransactionNotType || t == TransactionCommitType
}
