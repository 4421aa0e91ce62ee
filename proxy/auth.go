package proxy

// Access control (aclEnable): every call's `authorization` metadata is checked against the
// accounts of aclConfigFile, the plain_acl.yml the brokers read (package acl: the same white
// lists, accounts and permissions as the remoting path, acl.Config.Authorize), before the RPC
// runs (interceptors.go). The 5.x clients sign the x-mq-date-time header:
//
//	authorization: MQv2-HMAC-SHA1 Credential=<AK>/<region>/<service>, SignedHeaders=x-mq-date-time, Signature=<hex>
//
// where the signature is the lowercase hex HMAC-SHA1 of the x-mq-date-time value under the
// account's secret key (the Node client writes Credential=<AK> alone). A call with no, unknown or
// wrongly signed credentials is answered in-band UNAUTHORIZED; an account lacking the topic or
// group permission the RPC needs, FORBIDDEN. The date is not checked against the clock: the Go
// client formats it from local time with a literal Z.
//
// Permissions per RPC follow the remoting path's (broker/acl.go): sends, transaction ends and
// recalls need PUB on the topic; receiving, acking, invisibility changes, dead-lettering,
// assignments and offsets SUB on the topic and the group; a route PUB or SUB on the topic;
// heartbeats and terminations SUB on the group they name; Telemetry settings PUB on the
// producer's topics, SUB on the consumer's group and topics.

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strings"

	"google.golang.org/grpc/metadata"

	"rocketraft/acl"
	"rocketraft/proxy/rmqpb"
)

// Metadata keys of a signed call.
const (
	mdAuthorization = "authorization"
	mdDateTime      = "x-mq-date-time"
	mdClientID      = "x-mq-client-id"
	mdLanguage      = "x-mq-language"
	mdClientVersion = "x-mq-client-version"
)

// credentialOf reads the access key and signature check of a call's metadata.
func credentialOf(md metadata.MD) acl.Credential {
	auth := first(md, mdAuthorization)
	date := first(md, mdDateTime)
	var ak, sig string
	if _, rest, ok := strings.Cut(auth, " "); ok {
		for _, part := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
			switch k {
			case "Credential":
				ak, _, _ = strings.Cut(v, "/")
			case "Signature":
				sig = v
			}
		}
	}
	want, err := hex.DecodeString(sig)
	return acl.Credential{
		AccessKey: ak,
		Signed:    sig != "",
		Verify: func(secret string) bool {
			if err != nil || date == "" {
				return false
			}
			mac := hmac.New(sha1.New, []byte(secret))
			mac.Write([]byte(date))
			return hmac.Equal(mac.Sum(nil), want)
		},
	}
}

func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// resourcesOf lists what a request touches and the permission each needs.
func resourcesOf(req any) []acl.Resource {
	names := namesOf(req)
	out := make([]acl.Resource, 0, len(names))
	for _, n := range names {
		if n.group {
			out = append(out, acl.Group(n.name, acl.Sub))
		} else {
			out = append(out, acl.Topic(n.name, n.need))
		}
	}
	return out
}

// namedResource is one topic or group name of a request, and the permission the RPC needs on it.
type namedResource struct {
	name  string
	group bool
	need  acl.Perm
}

// namesOf lists every topic and group a request names (resourcesOf for the ACL, checkNames for
// validation: one list, so both see the same names).
func namesOf(req any) []namedResource {
	topic := func(r *rmqpb.Resource, need acl.Perm) namedResource {
		return namedResource{name: r.GetName(), need: need}
	}
	group := func(r *rmqpb.Resource) namedResource {
		return namedResource{name: r.GetName(), group: true, need: acl.Sub}
	}
	switch r := req.(type) {
	case *rmqpb.QueryRouteRequest:
		return []namedResource{topic(r.GetTopic(), acl.Any)}
	case *rmqpb.HeartbeatRequest:
		return []namedResource{group(r.GetGroup())}
	case *rmqpb.NotifyClientTerminationRequest:
		return []namedResource{group(r.GetGroup())}
	case *rmqpb.SendMessageRequest:
		var out []namedResource
		for _, m := range r.GetMessages() {
			out = append(out, topic(m.GetTopic(), acl.Pub))
		}
		return out
	case *rmqpb.EndTransactionRequest:
		return []namedResource{topic(r.GetTopic(), acl.Pub)}
	case *rmqpb.RecallMessageRequest:
		return []namedResource{topic(r.GetTopic(), acl.Pub)}
	case *rmqpb.ReceiveMessageRequest:
		return []namedResource{topic(r.GetMessageQueue().GetTopic(), acl.Sub), group(r.GetGroup())}
	case *rmqpb.AckMessageRequest:
		return []namedResource{topic(r.GetTopic(), acl.Sub), group(r.GetGroup())}
	case *rmqpb.ChangeInvisibleDurationRequest:
		return []namedResource{topic(r.GetTopic(), acl.Sub), group(r.GetGroup())}
	case *rmqpb.ForwardMessageToDeadLetterQueueRequest:
		return []namedResource{topic(r.GetTopic(), acl.Sub), group(r.GetGroup())}
	case *rmqpb.QueryAssignmentRequest:
		return []namedResource{topic(r.GetTopic(), acl.Sub), group(r.GetGroup())}
	case *rmqpb.PullMessageRequest:
		return []namedResource{topic(r.GetMessageQueue().GetTopic(), acl.Sub), group(r.GetGroup())}
	case *rmqpb.UpdateOffsetRequest:
		return []namedResource{topic(r.GetMessageQueue().GetTopic(), acl.Sub), group(r.GetGroup())}
	case *rmqpb.GetOffsetRequest:
		return []namedResource{topic(r.GetMessageQueue().GetTopic(), acl.Sub), group(r.GetGroup())}
	case *rmqpb.QueryOffsetRequest:
		return []namedResource{topic(r.GetMessageQueue().GetTopic(), acl.Sub)}
	case *rmqpb.SyncLiteSubscriptionRequest:
		return []namedResource{topic(r.GetTopic(), acl.Sub), group(r.GetGroup())}
	case *rmqpb.TelemetryCommand:
		s := r.GetSettings()
		var out []namedResource
		for _, t := range s.GetPublishing().GetTopics() {
			out = append(out, topic(t, acl.Pub))
		}
		if sub := s.GetSubscription(); sub != nil {
			out = append(out, group(sub.GetGroup()))
			for _, e := range sub.GetSubscriptions() {
				out = append(out, topic(e.GetTopic(), acl.Sub))
			}
		}
		return out
	}
	return nil
}

// authorize checks one call (req may be nil: credentials only). nil: let it through.
func (s *Server) authorize(md metadata.MD, remote, rpc string, req any) *rmqpb.Status {
	if s.acl == nil {
		return nil
	}
	var res []acl.Resource
	if req != nil {
		res = resourcesOf(req)
	}
	_, err := s.acl.Current().Authorize(credentialOf(md), acl.Access{What: rpc, RemoteAddr: remote, Resources: res})
	if err == nil {
		return nil
	}
	s.log.Warn("call refused by ACL", "rpc", rpc, "remote", remote, "client", first(md, mdClientID), "reason", err)
	if errors.Is(err, acl.ErrBadCredentials) {
		return fail(rmqpb.Code_UNAUTHORIZED, "%v", err)
	}
	return fail(rmqpb.Code_FORBIDDEN, "%v", err)
}
