package broker

// GET_BROKER_CONFIG (26): the broker's effective configuration as Java's properties text
// ("key=value" lines, every key of broker.properties in declaration order), as mqadmin
// getBrokerConfig prints it. The values UPDATE_BROKER_CONFIG changed at runtime
// (brokerconfig.go) are shown as they are now, not as the file says; derived keys
// (haListenPort, storePathCommitLog) are shown as the broker resolved them. Secrets (secretKey)
// are redacted: the answer leaves the process. With aclEnable it needs an admin account, like
// UPDATE_BROKER_CONFIG. RocketMQ also sets a `version` header (its config DataVersion); this
// broker's configuration has no version, so none is sent.

import (
	"strconv"

	"rocketraft/config"
	"rocketraft/remoting"
)

// effectiveConfig is a copy of the broker's configuration with the runtime overrides applied.
func (b *Broker) effectiveConfig() *config.Broker {
	c := *b.cfg
	c.BrokerPermission = int(b.brokerPermission())
	c.SlaveReadEnable = b.slaveReadEnabled()
	if lvl := b.logger.GetLevel(); lvl != 0 {
		c.LogLevel = lvl.String()
	}
	return &c
}

func (b *Broker) handleGetBrokerConfig(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	resp := req.NewResponse(remoting.Success, "")
	resp.Body = []byte(config.RedactedProperties(b.effectiveConfig()))
	if resp.ExtFields == nil {
		resp.ExtFields = map[string]string{}
	}
	resp.ExtFields["brokerId"] = strconv.FormatInt(b.brokerID(), 10)
	return resp
}
