package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// Probe operations: what RunProbe repeats until it succeeds.
const (
	ProbeSend = "send" // one SEND_MESSAGE_V2 of a 1 KiB message to queue 0, WAIT=true: SEND_OK
	ProbePull = "pull" // one PULL_MESSAGE of queue 0 from offset 0: FOUND
)

// ProbeConfig configures RunProbe: how long a restarted broker takes to serve again
// (scripts/figures.sh times a node holding 1 GiB of commitlog from its exec).
type ProbeConfig struct {
	// Addrs are the brokers tried in turn (any one succeeding ends the probe).
	Addrs []string
	Topic string
	// Op is ProbeSend or ProbePull.
	Op string
	// Since is the instant the time is counted from (the broker's exec); zero: the start.
	Since time.Time
	// Timeout bounds the whole probe; Every is the pause between two rounds of attempts.
	Timeout, Every time.Duration
}

// ProbeResult is the first success of a probe.
type ProbeResult struct {
	Addr     string
	Elapsed  time.Duration // from Since to the answer
	Attempts int
}

// RunProbe repeats cfg.Op against cfg.Addrs until one answers with success, and prints one line
// "PROBE op=... addr=... ms=... attempts=..." on out, then why the first and the last failed
// attempt failed. Each attempt waits at most a second.
func RunProbe(ctx context.Context, cfg ProbeConfig, out io.Writer) (*ProbeResult, error) {
	if len(cfg.Addrs) == 0 || cfg.Topic == "" {
		return nil, fmt.Errorf("probe needs --addr and --topic")
	}
	if cfg.Op != ProbeSend && cfg.Op != ProbePull {
		return nil, fmt.Errorf("unknown probe op %q (want %s or %s)", cfg.Op, ProbeSend, ProbePull)
	}
	if cfg.Since.IsZero() {
		cfg.Since = time.Now()
	}
	cl := remoting.NewClient(remoting.ClientConfig{})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	body := make([]byte, 1024)
	_, _ = rand.Read(body)
	var first, last error // why the first and the latest failed attempt failed
	for attempts := 1; ; attempts++ {
		for _, addr := range cfg.Addrs {
			actx, acancel := context.WithTimeout(ctx, time.Second)
			resp, err := cl.Invoke(actx, addr, probeRequest(cfg, body))
			acancel()
			if err == nil && resp.Code == remoting.Success {
				res := &ProbeResult{Addr: addr, Elapsed: time.Since(cfg.Since), Attempts: attempts}
				fmt.Fprintf(out, "PROBE op=%s addr=%s ms=%.1f attempts=%d\n", cfg.Op, addr, float64(res.Elapsed.Microseconds())/1000, attempts)
				if first != nil {
					fmt.Fprintf(out, "  first failure: %v\n  last failure: %v\n", first, last)
				}
				return res, nil
			}
			if err == nil {
				err = fmt.Errorf("%s: %s (code %d): %s", addr, responseCodeName(resp.Code), resp.Code, resp.Remark)
			}
			if first == nil {
				first = err
			}
			last = err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("probe %s: no success within %s: %w", cfg.Op, cfg.Timeout, last)
		case <-time.After(cfg.Every):
		}
	}
}

// probeRequest is one attempt's request.
func probeRequest(cfg ProbeConfig, body []byte) *remoting.Command {
	if cfg.Op == ProbePull {
		h := protocol.PullMessageRequestHeader{ConsumerGroup: "mqbench_probe", Topic: cfg.Topic, MaxMsgNums: 1,
			SysFlag: protocol.PullSubscription, Subscription: "*", ExpressionType: "TAG"}
		return remoting.NewRequest(remoting.PullMessage, h.ToExt(), nil)
	}
	h := protocol.SendMessageRequestHeader{ProducerGroup: "mqbench_probe", Topic: cfg.Topic,
		DefaultTopic: defaultTopic, DefaultTopicQueueNums: defaultTopicQueueNums,
		BornTimestamp: time.Now().UnixMilli(),
		Properties:    message.FormatProperties(map[string]string{message.PropertyWaitStoreMsgOK: "true"})}
	return remoting.NewRequest(remoting.SendMessageV2, h.ToExtV2(), body)
}

// ParseAddrs splits a ';'- or ','-separated address list, dropping empty items.
func ParseAddrs(s string) []string {
	var out []string
	for _, a := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' }) {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// ParseUnixNanos reads a time given as nanoseconds since the epoch (date +%s%N); "" is zero.
func ParseUnixNanos(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: want nanoseconds since the epoch: %w", s, err)
	}
	return time.Unix(0, n), nil
}
