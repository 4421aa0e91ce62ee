package broker

// Name validation on every path that records a group or topic name.
//
// The admin commands (UPDATE_AND_CREATE_TOPIC in handle_topics.go,
// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP in handle_groups.go) check names with message.ValidateTopic and message.ValidateGroup. Every other request that
// creates or stores a name — heartbeats (client tables, auto-created groups and %RETRY% topics),
// offset commits and queries, send-back (%RETRY%/%DLQ% topics derived from the group), pulls and
// POP (auto-created groups, POP state), lock/unlock (lock table) and offset resets — checks its
// names with the same functions before doing anything, and answers INVALID_PARAMETER (29)
// naming the field. The helpers that write the tables (ensureTopic, createTopicFromDefault,
// groupOrCreate, commitOffset in metachange.go) check again, so a path added later without its
// own check still cannot store a bad name.

import (
	"github.com/hashicorp/go-hclog"

	"rocketraft/message"
	"rocketraft/remoting"
)

// nameCheck is one name of a request and the validator its kind needs.
type nameCheck struct {
	field string // what the request calls it, for the remark
	name  string
	valid func(string) error
}

func topicName(field, name string) nameCheck {
	return nameCheck{field, name, message.ValidateTopic}
}

func groupName(field, name string) nameCheck {
	return nameCheck{field, name, message.ValidateGroup}
}

// consumerGroupName is a group whose %RETRY%/%DLQ% topics the request may create.
func consumerGroupName(field, name string) nameCheck {
	return nameCheck{field, name, message.ValidateConsumerGroup}
}

// nameGuard refuses requests with invalid names and logs each refusal: the one place that
// wording and log line live, handed to every handler type that records names.
type nameGuard struct{ logger hclog.Logger }

// refuseBadNames answers INVALID_PARAMETER for the first invalid name, or returns nil.
func (g nameGuard) refuseBadNames(req *remoting.Command, checks ...nameCheck) *remoting.Command {
	for _, c := range checks {
		if err := c.valid(c.name); err != nil {
			return g.refuseBadName(req, c.field, err)
		}
	}
	return nil
}

// refuseBadName logs and answers one invalid name.
func (g nameGuard) refuseBadName(req *remoting.Command, field string, err error) *remoting.Command {
	g.logger.Warn("request refused: invalid name", "code", req.Code, "field", field, "error", err)
	return req.NewResponse(remoting.InvalidParameter, "invalid "+field+": "+err.Error())
}
