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

// openACL loads the accounts file when aclEnable is set and checks the broker's own account
// against it: it must exist there with the same secret key and be an admin, since it signs
// registrations and forwarded writes that need one.
func (b *Broker) openACL() error {
	if !b.cfg.AclEnable {
		return nil
	}
	store, err := acl.OpenStore(b.cfg.AclConfigFile, b.logger.Named("acl"))
	if err != nil {
		return fmt.Errorf("aclEnable: %w", err)
	}
	if ak := b.cfg.AccessKey; ak != "" {
		a := store.Current().Accounts[ak]
		switch {
		case a == nil:
			return fmt.Errorf("aclEnable: the broker's accessKey %q is not an account of %s", ak, b.cfg.AclConfigFile)
		case a.SecretKey != b.cfg.SecretKey:
			return fmt.Errorf("aclEnable: the broker's secretKey differs from account %q of %s", ak, b.cfg.AclConfigFile)
		case !a.Admin:
			return fmt.Errorf("aclEnable: the broker's account %q must be an admin account (admin: true) of %s", ak, b.cfg.AclConfigFile)
		}
	}
	b.acl = store
	b.logger.Info("ACL on", "file", b.cfg.AclConfigFile, "accounts", len(store.Current().Accounts))
	return nil
}

// signRequest signs a request this broker sends (name servers, its Raft leader, peers) with
// its own account; the remoting clients call it just before sending.
func (b *Broker) signRequest(req *remoting.Command) {
	if req.ExtFields == nil {
		req.ExtFields = map[string]string{}
	}
	acl.Sign(req.ExtFields, req.Body, b.cfg.AccessKey, b.cfg.SecretKey)
}

// outgoingHook is the remoting clients' BeforeRequest: signing when the broker has an account.
func (b *Broker) outgoingHook() func(*remoting.Command) {
	if b.cfg.AccessKey == "" {
		return nil
	}
	return b.signRequest
}

// checkACL is the remoting server's interceptor: nil lets the request through.
func (b *Broker) checkACL(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	d, err := b.acl.Current().Check(acl.Request{
		Code:       req.Code,
		RemoteAddr: conn.RemoteAddr(),
		Ext:        req.ExtFields,
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
		b.logger.Error("ACL check failed", "code", req.Code, "error", err)
	}
	b.logger.Warn("request refused by ACL", "code", req.Code, "remote", conn.RemoteAddr(), "reason", err)
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
// (raftAdminGuard, raftadmin.go).
func (b *Broker) warnACLOff(listen string) {
	if b.cfg.AclEnable || config.LoopbackOnly(listen) {
		return
	}
	raftAdmin := "refused (allowUnauthenticatedRaftAdmin=false)"
	if b.cfg.AllowUnauthenticatedRaftAdmin {
		raftAdmin = "ALLOWED to anyone (allowUnauthenticatedRaftAdmin=true)"
	}
	b.logger.Warn("SECURITY: aclEnable=false and the broker listens beyond loopback: anyone who reaches "+listen+
		" may create and delete topics and groups, reset consumer offsets and drain this broker; set aclEnable=true (docs/operations.md \"ACL\") or keep the port on a private network",
		"listen", listen, "raft_membership_requests", raftAdmin)
}
