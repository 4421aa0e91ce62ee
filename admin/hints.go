package admin

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"syscall"

	"rocketraft/internal/suggest"
)

// unknownCommand is the message for a command mqadmin does not have, with the closest ones.
func unknownCommand(name string) string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return fmt.Sprintf("mqadmin: unknown command %q%s; run 'mqadmin help' for the list\n", name, suggest.Hint(name, names))
}

// refusedHint explains a refused connection inside err: which address was tried and, for a
// name server address (or any address when namesrvs is empty and the command talks to name
// servers), how to start one. "" when err is not a refused connection.
func refusedHint(err error, namesrvs []string) string {
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return ""
	}
	addr := ""
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil {
		addr = op.Addr.String()
	}
	if addr == "" {
		return "nothing accepted the connection (refused): check the address and that the process is running\n"
	}
	if slices.Contains(namesrvs, addr) {
		return fmt.Sprintf("nothing listens at %s, the name server address tried (-n or NAMESRV_ADDR). Start one with "+
			"'make run' (a name server on 127.0.0.1:9876 and a three-node group) or 'bin/mqnamesrv --listen %s', "+
			"or pass the right one with -n host:port\n", addr, addr)
	}
	return fmt.Sprintf("nothing listens at %s (connection refused): is the broker running there? "+
		"'mqadmin clusterList -n <namesrv>' lists the live brokers' addresses\n", addr)
}
