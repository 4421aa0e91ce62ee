package broker

// Access control (aclEnable): every request is checked before its handler by the remoting
// server's interceptor, with RocketMQ's plain ACL steps (acl.Config.Check): white lists, the
// client's HMAC-SHA1 signature, admin-only codes and topic/group permissions. A refusal is
// NO_PERMISSION (16) naming the reason.
//
// Resources per request code follow RocketMQ's PlainAccessValidator: sends need PUB on the
// topic (a send to %RETRY%<group> needs SUB on the group), pulls and offset requests SUB on
// the topic and the group, heartbeats SUB on each consumer group and subscribed topic,
// CONSUMER_SEND_MSG_BACK and the queue locks SUB on the group. adminCodes need an admin
// account. Every other request needs a valid signature (or a white-listed address) only.
//
// Forwarding (DLedger mode): a follower checks the client's request itself, then re-signs the
// copy it forwards to the leader with the broker's own account (accessKey/secretKey, an admin
// account), replacing the client's AccessKey and Signature. The leader therefore verifies
// the follower, not the client, and trusts the forwarding fields (__rrForwarded,
// __rrBornHost) only on a request signed by an admin account, so a client cannot spoof a born
// host. The follower does not pass on the client's signature because the leader could not
// check it against the fields the follower adds.

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/acl"
	"rocketraft/config"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// aclReloadInterval is how often the accounts file is checked for changes.
const aclReloadInterval = 2 * time.Second

// adminCodes are the broker requests RocketMQ reserves for admin accounts (topic and group
// changes, configuration, offset resets, ACL administration) plus our Raft administration.
var adminCodes = map[int32]bool{
	remoting.UpdateAndCreateTopic: true,
	18:                            true, // UPDATE_AND_CREATE_TOPIC_LIST
	remoting.UpdateBrokerConfig:   true,
	remoting.GetBrokerConfig:      true, // store paths, ports and accounts are an operator's business
	remoting.DeleteTopicInBroker:  true,
	remoting.UpdateAndCreateSubscriptionGroup: true,
	remoting.DeleteSubscriptionGroup:          true,
	remoting.InvokeBrokerToResetOffset:        true,
	50:                                        true, // UPDATE_AND_CREATE_ACL_CONFIG
	51:                                        true, // DELETE_ACL_CONFIG
	52:                                        true, // GET_BROKER_CLUSTER_ACL_INFO
	53:                                        true, // UPDATE_GLOBAL_WHITE_ADDRS_CONFIG
	323:                                       true, // RESUME_CHECK_HALF_MESSAGE
	remoting.TransferRaftLeader:               true,
	remoting.AddRaftPeer:                      true,
	remoting.RemoveRaftPeer:                   true,
}

// aclGate is the broker's side of access control: the accounts store when aclEnable is set
// (nil store: off), the check of incoming requests and the signing of the broker's own
// outgoing ones. It keeps the ACL rules in one place that needs only the configuration.
type aclGate struct {
	cfg    *config.Broker
	logger hclog.Logger
	store  *acl.Store // nil: aclEnable=false
}

// openACLGate loads the accounts file when aclEnable is set and checks the broker's own account
// against it: it must exist there with the same secret key and be an admin, since it signs
// registrations and forwarded writes that need one.
func openACLGate(cfg *config.Broker, logger hclog.Logger) (*aclGate, error) {
	g := &aclGate{cfg: cfg, logger: logger}
	if !cfg.AclEnable {
		return g, nil
	}
	store, err := acl.OpenStore(cfg.AclConfigFile, logger.Named("acl"))
	if err != nil {
		return nil, fmt.Errorf("aclEnable: %w", err)
	}
	if ak := cfg.AccessKey; ak != "" {
		a := store.Current().Accounts[ak]
		switch {
		case a == nil:
			return nil, fmt.Errorf("aclEnable: the broker's accessKey %q is not an account of %s", ak, cfg.AclConfigFile)
		case a.SecretKey != cfg.SecretKey:
			return nil, fmt.Errorf("aclEnable: the broker's secretKey differs from account %q of %s", ak, cfg.AclConfigFile)
		case !a.Admin:
			return nil, fmt.Errorf("aclEnable: the broker's account %q must be an admin account (admin: true) of %s", ak, cfg.AclConfigFile)
		}
	}
	g.store = store
	logger.Info("ACL on", "file", cfg.AclConfigFile, "accounts", len(store.Current().Accounts))
	return g, nil
}

// signRequest signs a request this broker sends (name servers, its Raft leader, peers) with
// its own account; the remoting clients call it just before sending.
func (g *aclGate) signRequest(req *remoting.Command) {
	acl.Sign(req.Fields(), req.Body, g.cfg.AccessKey, g.cfg.SecretKey)
}

// outgoingHook is the remoting clients' BeforeRequest: signing when the broker has an account.
func (g *aclGate) outgoingHook() func(*remoting.Command) {
	if g.cfg.AccessKey == "" {
		return nil
	}
	return g.signRequest
}

// check is the remoting server's interceptor: nil lets the request through. With ACL off
// every request passes.
func (g *aclGate) check(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if g.store == nil {
		return nil
	}
	return g.decide(conn.RemoteAddr(), req)
}

// decide checks req, sent from remote, against the accounts: nil lets it through, otherwise the
// NO_PERMISSION answer naming the reason.
func (g *aclGate) decide(remote string, req *remoting.Command) *remoting.Command {
	d, err := g.store.Current().Check(acl.Request{
		Code:       req.Code,
		RemoteAddr: remote,
		Ext:        req.Fields(),
		Body:       req.Body,
		Resources:  aclResources(req),
		NeedAdmin:  adminCodes[req.Code],
	})
	if err == nil && (req.Ext(extForwarded) != "" || req.Ext(extBornHost) != "") && d.Account != nil && !d.Account.Admin {
		err = fmt.Errorf("%w: the fields %s/%s are reserved for brokers forwarding a write (admin accounts)", acl.ErrDenied, extForwarded, extBornHost)
	}
	if err == nil {
		return nil
	}
	if !errors.Is(err, acl.ErrDenied) {
		g.logger.Error("ACL check failed", "code", req.Code, "error", err)
	}
	g.logger.Warn("request refused by ACL", "code", req.Code, "remote", remote, "reason", err)
	return req.NewResponse(remoting.NoPermission, err.Error())
}

// aclResources lists the topics and groups a request touches and the permission each needs.
func aclResources(req *remoting.Command) []acl.Resource {
	ext := req.Ext
	switch req.Code {
	case remoting.SendMessage:
		return sendResources(ext("topic"))
	case remoting.SendMessageV2, remoting.SendBatchMessage:
		return sendResources(ext("b"))
	case remoting.PullMessage, remoting.LitePullMessage,
		remoting.QueryConsumerOffset, remoting.UpdateConsumerOffset:
		return []acl.Resource{acl.Topic(ext("topic"), acl.Sub), acl.Group(ext("consumerGroup"), acl.Sub)}
	case remoting.QueryMessage, remoting.SearchOffsetByTimestamp, remoting.GetMaxOffset,
		remoting.GetMinOffset, remoting.GetEarliestMsgStoreTime:
		return []acl.Resource{acl.Topic(ext("topic"), acl.Sub)}
	case remoting.ConsumerSendMsgBack:
		return []acl.Resource{acl.Group(ext("group"), acl.Sub)}
	case remoting.UnregisterClient, remoting.GetConsumerListByGroup:
		return []acl.Resource{acl.Group(ext("consumerGroup"), acl.Sub)}
	case remoting.EndTransaction:
		if t := ext("topic"); t != "" { // 5.x clients name it; 4.x ones do not
			return []acl.Resource{acl.Topic(t, acl.Pub)}
		}
	case remoting.LockBatchMQ, remoting.UnlockBatchMQ:
		var body protocol.LockBatchRequestBody
		if protocol.Decode(req.Body, &body) == nil {
			return []acl.Resource{acl.Group(body.ConsumerGroup, acl.Sub)}
		}
	case remoting.HeartBeat:
		return heartbeatResources(req.Body)
	case remoting.PopMessage, remoting.AckMessage, remoting.ChangeMessageInvisibleTime:
		return []acl.Resource{acl.Topic(ext("topic"), acl.Sub), acl.Group(ext("consumerGroup"), acl.Sub)}
	case remoting.BatchAckMessage:
		var body protocol.BatchAckBody
		if protocol.Decode(req.Body, &body) == nil {
			var out []acl.Resource
			for _, a := range body.Acks {
				a.Normalize()
				out = append(out, acl.Topic(a.Topic, acl.Sub), acl.Group(a.ConsumerGroup, acl.Sub))
			}
			return out
		}
	}
	return nil
}

// sendResources: PUB on the topic, or SUB on the group for its retry topic (a consumer's
// fallback when CONSUMER_SEND_MSG_BACK fails).
func sendResources(topic string) []acl.Resource {
	r := acl.Topic(topic, acl.Pub)
	if r.Group {
		r.Need = acl.Sub
	}
	return []acl.Resource{r}
}

// heartbeatResources: SUB on every consumer group and every subscribed topic other than the
// groups' own retry topics. An undecodable body lists nothing (the handler refuses it).
func heartbeatResources(body []byte) []acl.Resource {
	var hb protocol.HeartbeatData
	if protocol.Decode(body, &hb) != nil {
		return nil
	}
	var out []acl.Resource
	for _, c := range hb.ConsumerDataSet {
		out = append(out, acl.Group(c.GroupName, acl.Sub))
		for _, s := range c.SubscriptionDataSet {
			if r := acl.Topic(s.Topic, acl.Sub); !r.Group {
				out = append(out, r)
			}
		}
	}
	return out
}

// warnACLOff logs, at start, a loud warning when ACL is off and the client port listens beyond
// loopback: then anyone who reaches it may create and delete topics and groups, reset consumer
// offsets and change brokerPermission, as with RocketMQ's defaults (which this keeps). The Raft
// membership requests are refused unless allowUnauthenticatedRaftAdmin says otherwise
// (raftAdmin.guard, raftadmin.go).
func (g *aclGate) warnACLOff(listen string) {
	if g.cfg.AclEnable || config.LoopbackOnly(listen) {
		return
	}
	raftAdmin := "refused (allowUnauthenticatedRaftAdmin=false)"
	if g.cfg.AllowUnauthenticatedRaftAdmin {
		raftAdmin = "ALLOWED to anyone (allowUnauthenticatedRaftAdmin=true)"
	}
	g.logger.Warn("SECURITY: aclEnable=false and the broker listens beyond loopback: anyone who reaches "+listen+
		" may create and delete topics and groups, reset consumer offsets and drain this broker; set aclEnable=true (docs/operations.md \"ACL\") or keep the port on a private network",
		"listen", listen, "raft_membership_requests", raftAdmin)
}
