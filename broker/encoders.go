package broker

import (
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// encoders are the request table's body encoders (handlers.go: jsonResponse, fastjsonResponse),
// handed to the admin handler types so each answers in the one layout the table uses without
// holding the Broker; embedded, they read as h.json(req, v).
type encoders struct {
	// json answers SUCCESS with a value as the JSON body.
	json func(req *remoting.Command, v any) *remoting.Command
	// fastjson answers SUCCESS with a value in fastjson's layout (non-string map keys).
	fastjson func(req *remoting.Command, v protocol.FastjsonEncoder) *remoting.Command
}
