package acl

import (
	"errors"
	"fmt"
	"strings"
)

// RetryPrefix starts the retry topic of a consumer group; RocketMQ checks a group's permission
// as SUB on it.
const RetryPrefix = "%RETRY%"

// ErrDenied is wrapped by every refusal of Check, so callers answer NO_PERMISSION.
var ErrDenied = errors.New("access denied")

// Resource is one topic or consumer group a request touches, with the permission it needs.
type Resource struct {
	Name  string
	Group bool
	Need  Perm
}

// Topic and Group build resources. A topic named %RETRY%<group> is the group's resource, as
// in RocketMQ.
func Topic(name string, need Perm) Resource {
	if g, ok := strings.CutPrefix(name, RetryPrefix); ok {
		return Resource{Name: g, Group: true, Need: need}
	}
	return Resource{Name: name, Need: need}
}

// Group is a consumer or producer group resource (name with or without %RETRY%).
func Group(name string, need Perm) Resource {
	return Resource{Name: strings.TrimPrefix(name, RetryPrefix), Group: true, Need: need}
}

// Request is what Check needs to know about one request.
type Request struct {
	Code       int32
	RemoteAddr string
	Ext        map[string]string
	Body       []byte
	Resources  []Resource
	// NeedAdmin: the request needs an account with admin: true.
	NeedAdmin bool
}

// Decision is the outcome of a successful Check.
type Decision struct {
	// Account is the verified account, nil when a global white-list entry let the request in.
	Account *Account
	// Whitelisted: a white list (global or the account's) replaced the signature check.
	Whitelisted bool
}

// Check runs RocketMQ's plain ACL steps: a globally white-listed address passes; otherwise
// the request must name a known AccessKey; the account's own white list passes; otherwise the
// signature must verify; then admin requests need an admin account and every resource must
// be allowed (admin accounts are allowed everything). Refusals wrap ErrDenied and say why.
func (c *Config) Check(r Request) (Decision, error) {
	if matchAny(c.GlobalWhite, r.RemoteAddr) {
		return Decision{Whitelisted: true}, nil
	}
	ak := r.Ext[ExtAccessKey]
	if ak == "" {
		return Decision{}, fmt.Errorf("%w: request code %d carries no AccessKey (configure the client's credentials)", ErrDenied, r.Code)
	}
	a := c.Accounts[ak]
	if a == nil {
		return Decision{}, fmt.Errorf("%w: no account with accessKey %q", ErrDenied, ak)
	}
	d := Decision{Account: a}
	if matchAny(a.White, r.RemoteAddr) {
		d.Whitelisted = true
		return d, nil
	}
	if r.Ext[ExtSignature] == "" {
		return Decision{}, fmt.Errorf("%w: request code %d from accessKey %q carries no Signature", ErrDenied, r.Code, ak)
	}
	if !VerifySignature(r.Ext, r.Body, a.SecretKey) {
		return Decision{}, fmt.Errorf("%w: signature mismatch for accessKey %q on request code %d (wrong secretKey?)", ErrDenied, ak, r.Code)
	}
	if a.Admin {
		return d, nil
	}
	if r.NeedAdmin {
		return Decision{}, fmt.Errorf("%w: request code %d needs an admin account; accessKey %q is not one", ErrDenied, r.Code, ak)
	}
	for _, res := range r.Resources {
		if res.Name == "" {
			continue
		}
		if !a.Allows(res) {
			kind := "topic"
			if res.Group {
				kind = "group"
			}
			return Decision{}, fmt.Errorf("%w: accessKey %q has no %s permission on %s %q", ErrDenied, ak, res.Need, kind, res.Name)
		}
	}
	return d, nil
}

// Allows reports whether the account's own or default permission on res grants res.Need.
func (a *Account) Allows(res Resource) bool {
	if a.Admin {
		return true
	}
	table, def := a.TopicPerms, a.DefaultTopicPerm
	if res.Group {
		table, def = a.GroupPerms, a.DefaultGroupPerm
	}
	owned, ok := table[res.Name]
	if !ok {
		owned = def
	}
	return owned.Allows(res.Need)
}
