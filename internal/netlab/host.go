package netlab

import (
	"net"
	"os/exec"
	"time"
)

// Host is one machine of the lab: a network namespace with lo and one interface, eth0, on the
// lab's bridge. Tests place a server or a client on a host by starting it with Command (or, for
// in-process probes, by opening sockets with Listen, ListenPacket and DialTimeout) and then
// reach it at IP.
type Host struct {
	// Name is the network namespace, as `ip netns list` shows it.
	Name string
	// IP is the host's address on eth0 (no prefix length); the only non-loopback address it has.
	IP string
}

// Command returns a command that runs name with args inside the host's namespace, via
// `ip netns exec`. That tool switches namespaces and then execs the program in place, so once
// the command has started, cmd.Process.Pid is the program's own PID: tests can SIGSTOP, SIGCONT
// or SIGKILL it directly to freeze or crash a node. The program also gets a private mount
// namespace in which /sys describes the host's namespace. Everything else (Env, Dir, Stdout,
// SysProcAttr...) is the caller's to set; the lab never stops what the caller starts.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	path, err := binary("ip")
	if err != nil {
		path = "ip" // Start reports the missing binary
	}
	return exec.Command(path, append([]string{"netns", "exec", h.Name, name}, args...)...)
}

// Listen opens a listener whose socket lives in the host's namespace, for test code in this
// process that plays a server on the host (a fake name server, a probe target). Accepting,
// reading and writing work from any goroutine: a socket keeps the namespace it was made in.
func (h *Host) Listen(network, address string) (net.Listener, error) {
	var l net.Listener
	err := inNamespace(h.Name, func() (err error) {
		l, err = net.Listen(network, address)
		return err
	})
	return l, err
}

// ListenPacket is Listen for datagram sockets (UDP), which show one-way cuts that TCP cannot:
// a TCP handshake needs both directions.
func (h *Host) ListenPacket(network, address string) (net.PacketConn, error) {
	var c net.PacketConn
	err := inNamespace(h.Name, func() (err error) {
		c, err = net.ListenPacket(network, address)
		return err
	})
	return c, err
}

// DialTimeout connects from the host, as a client running on it would. address must be a
// literal IP and port: name resolution would run outside the namespace.
func (h *Host) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := inNamespace(h.Name, func() (err error) {
		c, err = net.DialTimeout(network, address, timeout)
		return err
	})
	return c, err
}
