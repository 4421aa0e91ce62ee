package admin

// wipeWritePerm and addWritePerm, as Java's WipeWritePermSubCommand and AddWritePermSubCommand:
// WIPE_WRITE_PERM_OF_BROKER (205) or ADD_WRITE_PERM_OF_BROKER (327) with -b brokerName to every
// name server, printing per name server the number of topics whose write permission changed.
// This drains a broker (producers stop choosing it once their routes refresh) without touching
// the broker; its next registration (every 30 s) restores the name servers' view, so for a
// lasting drain use updateBrokerConfig -k brokerPermission -v 4 instead.

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// WritePermResult is one name server's answer.
type WritePermResult struct {
	Namesrv string `json:"namesrvAddr"`
	Count   int32  `json:"topicCount"`
	Error   string `json:"error,omitempty"`
}

// ChangeWritePerm sends 205 (wipe) or 327 (add) for brokerName to every name server.
func (t *Tool) ChangeWritePerm(ctx context.Context, brokerName string, wipe bool) ([]WritePermResult, error) {
	if len(t.cfg.NamesrvAddrs) == 0 {
		return nil, ErrNoNameServer
	}
	code, key := remoting.AddWritePermOfBroker, protocol.AddTopicCountKey
	if wipe {
		code, key = remoting.WipeWritePermOfBroker, protocol.WipeTopicCountKey
	}
	ext := (&protocol.BrokerNameHeader{BrokerName: brokerName}).ToExt()
	var out []WritePermResult
	var errs []error
	for _, ns := range t.cfg.NamesrvAddrs {
		r := WritePermResult{Namesrv: ns}
		resp, err := t.call(ctx, ns, code, ext, nil)
		if err == nil {
			h := protocol.WritePermResponseHeader{Key: key}
			if err = h.FromExt(resp.ExtFields); err != nil {
				err = fmt.Errorf("decode answer of %s: %w", ns, err)
			}
			r.Count = h.Count
		}
		if err != nil {
			r.Error = err.Error()
			errs = append(errs, err)
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

func writePermCommand(name, verb string, wipe bool) *command {
	return &command{
		name:    name,
		summary: fmt.Sprintf("%s the write permission of a broker's topics on every name server", verb),
		args:    "-b <brokerName>",
		setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
			var broker string
			fs.StringVarP(&broker, "brokerName", "b", "", "broker name")
			return func(ctx context.Context, t *Tool) error {
				if err := required(fs, "brokerName"); err != nil {
					return err
				}
				res, err := t.ChangeWritePerm(ctx, broker, wipe)
				if t.jsonOut() {
					if perr := t.printJSON(res); perr != nil {
						return perr
					}
					return err
				}
				op := "add"
				if wipe {
					op = "wipe"
				}
				for _, r := range res {
					if r.Error != "" {
						t.printf("%s write perm of broker[%s] in name server[%s] Failed: %s\n", op, broker, r.Namesrv, r.Error)
						continue
					}
					t.printf("%s write perm of broker[%s] in name server[%s] OK, %d\n", op, broker, r.Namesrv, r.Count)
				}
				return err
			}
		},
	}
}

var (
	wipeWritePermCommand = writePermCommand("wipeWritePerm", "Wipe", true)
	addWritePermCommand  = writePermCommand("addWritePerm", "Add", false)
)
