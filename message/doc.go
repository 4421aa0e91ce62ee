// Package message holds the RocketMQ message formats shared by the store and the broker: the
// stored record (which is also what clients receive in pull, query and view bodies), the
// properties string, the sysFlag bits, the batch send body, offset message ids and the Java
// hash functions the consume queue and index depend on.
//
// All integers are big-endian two's complement (Java ByteBuffer order).
//
// # Stored record (commitlog record)
//
// Offsets assume IPv4 born and store hosts; each IPv6 host (sysFlag bits 0x10 / 0x20) widens its
// field from 8 to 20 bytes and shifts every later field by 12.
//
//	offset  size     field
//	------  -------  ------------------------------------------------------------
//	0       4        TOTALSIZE         whole record, this field included
//	4       4        MAGICCODE         0xDAA320A7 = V1 (1-byte topic length)
//	                                   0xDAA320AB = V2 (2-byte topic length)
//	8       4        BODYCRC           CRC-32 IEEE of BODY & 0x7FFFFFFF
//	12      4        QUEUEID
//	16      4        FLAG              user flag
//	20      8        QUEUEOFFSET       logical offset in the consume queue
//	28      8        PHYSICALOFFSET    commitlog offset of this record
//	36      4        SYSFLAG           see SysFlag constants
//	40      8        BORNTIMESTAMP     ms
//	48      8|20     BORNHOST          IPv4 4 bytes | IPv6 16 bytes, then port as int
//	56      8        STORETIMESTAMP    ms
//	64      8|20     STOREHOSTADDRESS  same encoding as BORNHOST
//	72      4        RECONSUMETIMES
//	76      8        PREPAREDTRANSACTIONOFFSET
//	84      4        BODYLENGTH        n
//	88      n        BODY
//	88+n    1|2      TOPICLENGTH       byte (V1) | short (V2)
//	        t        TOPIC             UTF-8
//	        2        PROPERTIESLENGTH  short, p <= 32767
//	        p        PROPERTIES        name 0x01 value 0x02, repeated
//
// Total size (V1, IPv4/IPv4) = 91 + n + t + p.
//
// # Blank end-of-file marker (commitlog only)
//
//	offset  size  field
//	0       4     bytes from the marker to the end of the file
//	4       4     0xCBD43194 (BlankMagicCode)
//
// # Batch send body (SEND_BATCH_MESSAGE), entries back to back, no count
//
//	offset  size  field
//	0       4     TOTALSIZE   = 22 + n + p
//	4       4     MAGICCODE   (ignored)
//	8       4     BODYCRC     (ignored)
//	12      4     FLAG
//	16      4     BODYLENGTH  n
//	20      n     BODY
//	20+n    2     PROPERTIESLENGTH p
//	22+n    p     PROPERTIES
//
// # Offset message id
//
//	size   field
//	4|16   store host IP
//	4      store port
//	8      PHYSICALOFFSET
//
// rendered as upper-case hex (32 characters for IPv4, 56 for IPv6).
package message
