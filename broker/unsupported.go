package broker

// Request codes RocketMQ clients and tools send that this broker does not serve. Each gets
// REQUEST_CODE_NOT_SUPPORTED (3) with a remark naming the request and saying what to do instead,
// rather than the generic " request type N not supported" of an unknown code. They are
// registered before the real handlers (registerHandlers), so a code that gains an
// implementation simply registers over its entry here. docs/messaging.md's "Unsupported request
// codes" section is this table.

import (
	"fmt"
	"strconv"

	"rocketraft/remoting"
)

// unsupportedCode is one request code this broker answers with REQUEST_CODE_NOT_SUPPORTED.
type unsupportedCode struct {
	code   int32
	name   string
	reason string
}

// unsupportedCodes lists them by number.
var unsupportedCodes = []unsupportedCode{
	{13, "QUERY_BROKER_OFFSET", "a legacy request no client uses; use GET_MAX_OFFSET (30)"},
	{18, "UPDATE_AND_CREATE_TOPIC_LIST", "a 5.x admin request; create topics one at a time with UPDATE_AND_CREATE_TOPIC (17)"},
	{47, "GET_CLIENT_CONFIG", "a 5.x request; not supported"},
	{50, "UPDATE_AND_CREATE_ACL_CONFIG", "ACL administration over the wire is not supported; edit the aclConfigFile, which the broker reloads when it changes"},
	{51, "DELETE_ACL_CONFIG", "ACL administration over the wire is not supported; edit the aclConfigFile, which the broker reloads when it changes"},
	{52, "GET_BROKER_CLUSTER_ACL_INFO", "ACL administration over the wire is not supported; edit the aclConfigFile, which the broker reloads when it changes"},
	{53, "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG", "ACL administration over the wire is not supported; edit the aclConfigFile, which the broker reloads when it changes"},
	{remoting.InvokeBrokerToGetConsumerStatus, "INVOKE_BROKER_TO_GET_CONSUMER_STATUS", "relaying consumer status requests to clients is not supported; consumerProgress (GET_CONSUME_STATS, 208) shows the offsets"},
	{remoting.GetConsumerRunningInfo, "GET_CONSUMER_RUNNING_INFO", "relaying running-info requests to clients is not supported; consumerConnection (203) lists the members"},
	{remoting.ConsumeMessageDirectly, "CONSUME_MESSAGE_DIRECTLY", "relaying a message to one consumer is not supported"},
	{323, "RESUME_CHECK_HALF_MESSAGE", "transactional messages are not supported yet"},
	{remoting.SendReplyMessage, "SEND_REPLY_MESSAGE", "the request/reply pattern is not supported"},
	{remoting.SendReplyMessageV2, "SEND_REPLY_MESSAGE_V2", "the request/reply pattern is not supported"},
	{370, "RECALL_MESSAGE", "a 5.x timer request; not supported"},
	{400, "QUERY_ASSIGNMENT", "5.x server-side rebalance is not supported; clients rebalance themselves"},
	{401, "SET_MESSAGE_REQUEST_MODE", "5.x POP mode is not supported"},
	{200052, "PEEK_MESSAGE", "5.x POP consumption is not supported"},
	{200054, "NOTIFICATION", "5.x POP consumption is not supported"},
	{200055, "POLLING_INFO", "5.x POP consumption is not supported"},
	{200056, "POP_ROLLBACK", "5.x POP consumption is not supported"},
}

// unsupportedHandler answers one unsupported code.
func unsupportedHandler(u unsupportedCode) remoting.Handler {
	remark := fmt.Sprintf("request code %s %s is not supported by this broker (rocketraft): %s", strconv.Itoa(int(u.code)), u.name, u.reason)
	return func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		return req.NewResponse(remoting.RequestCodeNotSupported, remark)
	}
}

func registerUnsupported(s *remoting.Server) {
	for _, u := range unsupportedCodes {
		s.Handle(u.code, unsupportedHandler(u))
	}
}
