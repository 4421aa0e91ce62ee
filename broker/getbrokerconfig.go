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
func (h *configHandlers) effectiveConfig() *config.Broker {
	c := *h.cfg
	c.BrokerPermission = int(h.rt.permission(h.cfg))
	c.SlaveReadEnable = h.rt.slaveReadEnabled(h.cfg)
	if lvl := h.logger.GetLevel(); lvl != 0 {
		c.LogLevel = lvl.String()
	}
	return &c
}

// handleGetBrokerConfig serves GET_BROKER_CONFIG: the effective configuration, secrets redacted,
// and the node's brokerId.
func (h *configHandlers) handleGetBrokerConfig(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	resp := req.NewResponse(remoting.Success, "")
	resp.Body = []byte(config.RedactedProperties(h.effectiveConfig()))
	if resp.ExtFields == nil {
		resp.ExtFields = map[string]string{}
	}
	resp.ExtFields["brokerId"] = strconv.FormatInt(h.brokerID(), 10)
	return resp
}
