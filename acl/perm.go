package acl

import (
	"fmt"
	"strings"
)

// Perm is a permission bit set, numbered as RocketMQ's Permission class so values logged or
// compared with a Java broker's mean the same.
type Perm uint8

// Permission bits. Deny refuses; Pub allows producing; Sub allows consuming (for groups: using
// the group, which RocketMQ checks as SUB on its %RETRY% topic).
const (
	Deny Perm = 1
	Any  Perm = 1 << 1
	Pub  Perm = 1 << 2
	Sub  Perm = 1 << 3
)

// ParsePerm reads a permission word of plain_acl.yml: DENY, PUB, SUB, PUB|SUB or SUB|PUB
// (case-insensitive, spaces around '|' allowed). Unlike RocketMQ, which reads anything else as
// DENY, an unknown word is an error, so a typo cannot silently lock a topic.
func ParsePerm(s string) (Perm, error) {
	var p Perm
	for _, part := range strings.Split(s, "|") {
		switch strings.ToUpper(strings.TrimSpace(part)) {
		case "DENY":
			p |= Deny
		case "PUB":
			p |= Pub
		case "SUB":
			p |= Sub
		case "ANY":
			p |= Pub | Sub
		default:
			return 0, fmt.Errorf("unknown permission %q (want DENY, PUB, SUB or PUB|SUB)", s)
		}
	}
	if p&Deny != 0 && p != Deny {
		return 0, fmt.Errorf("permission %q mixes DENY with PUB/SUB", s)
	}
	return p, nil
}

// String renders p the way plain_acl.yml writes it.
func (p Perm) String() string {
	switch {
	case p == 0:
		return "NONE"
	case p&Deny != 0:
		return "DENY"
	case p&(Pub|Sub) == Pub|Sub:
		return "PUB|SUB"
	case p&Pub != 0:
		return "PUB"
	case p&Sub != 0:
		return "SUB"
	}
	return fmt.Sprintf("Perm(%d)", uint8(p))
}

// Allows reports whether owning p grants needed: DENY grants nothing, otherwise every bit of
// needed must be owned.
func (p Perm) Allows(needed Perm) bool {
	if p == 0 || p&Deny != 0 {
		return false
	}
	needed &^= Any
	return needed != 0 && p&needed == needed
}
