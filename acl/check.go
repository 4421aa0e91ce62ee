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

// ErrBadCredentials is wrapped, besides ErrDenied, by the refusals about who is asking (no or
// unknown AccessKey, no or wrong signature), so a caller can tell them from a known account
// lacking a permission (the gRPC proxy answers UNAUTHORIZED for one, FORBIDDEN for the other).
var ErrBadCredentials = errors.New("bad credentials")

// Check runs RocketMQ's plain ACL steps: a globally white-listed address passes; otherwise
// the request must name a known AccessKey; the account's own white list passes; otherwise the
// signature must verify; then admin requests need an admin account and every resource must
// be allowed (admin accounts are allowed everything). Refusals wrap ErrDenied and say why.
func (c *Config) Check(r Request) (Decision, error) {
	return c.Authorize(Credential{
		AccessKey: r.Ext[ExtAccessKey],
		Signed:    r.Ext[ExtSignature] != "",
		Verify:    func(secret string) bool { return VerifySignature(r.Ext, r.Body, secret) },
	}, Access{What: fmt.Sprintf("request code %d", r.Code), RemoteAddr: r.RemoteAddr, Resources: r.Resources, NeedAdmin: r.NeedAdmin})
}

// Credential is who a request says it comes from, whatever the protocol: the access key, whether
// it carries a signature at all, and how to check that signature against an account's secret.
type Credential struct {
	AccessKey string
	Signed    bool
	Verify    func(secret string) bool
}

// Access is what a request wants: What names it in refusals ("request code 10", "SendMessage").
type Access struct {
	What       string
	RemoteAddr string
	Resources  []Resource
	NeedAdmin  bool
}

// Authorize is Check for any protocol: the same white lists, accounts and permissions, with the
// signature checked by cred.Verify (the remoting path's ext-field signature, or the gRPC
// authorization header's). Refusals wrap ErrDenied; those about the credential also wrap
// ErrBadCredentials.
func (c *Config) Authorize(cred Credential, r Access) (Decision, error) {
	if matchAny(c.GlobalWhite, r.RemoteAddr) {
		return Decision{Whitelisted: true}, nil
	}
	ak := cred.AccessKey
	if ak == "" {
		return Decision{}, fmt.Errorf("%w: %w: %s carries no AccessKey (configure the client's credentials)", ErrDenied, ErrBadCredentials, r.What)
	}
	a := c.Accounts[ak]
	if a == nil {
		return Decision{}, fmt.Errorf("%w: %w: no account with accessKey %q", ErrDenied, ErrBadCredentials, ak)
	}
	d := Decision{Account: a}
	if matchAny(a.White, r.RemoteAddr) {
		d.Whitelisted = true
		return d, nil
	}
	if !cred.Signed {
		return Decision{}, fmt.Errorf("%w: %w: %s from accessKey %q carries no Signature", ErrDenied, ErrBadCredentials, r.What, ak)
	}
	if cred.Verify == nil || !cred.Verify(a.SecretKey) {
		return Decision{}, fmt.Errorf("%w: %w: signature mismatch for accessKey %q on %s (wrong secretKey?)", ErrDenied, ErrBadCredentials, ak, r.What)
	}
	if a.Admin {
		return d, nil
	}
	if r.NeedAdmin {
		return Decision{}, fmt.Errorf("%w: %s needs an admin account; accessKey %q is not one", ErrDenied, r.What, ak)
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
			need := res.Need.String()
			if res.Need == Any {
				need = "PUB or SUB"
			}
			return Decision{}, fmt.Errorf("%w: accessKey %q has no %s permission on %s %q", ErrDenied, ak, need, kind, res.Name)
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
	if res.Need == Any { // either will do (a route is asked by producers and consumers alike)
		return owned.Allows(Pub) || owned.Allows(Sub)
	}
	return owned.Allows(res.Need)
}
