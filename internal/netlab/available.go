package netlab

import (
	"errors"
	"fmt"
	"os"
)

// Available reports whether a lab can be built on this machine, so a test can fail up front
// with a message that says what to install instead of dying halfway through New. It returns
// nil, or an error listing every missing piece and how to get it.
func Available() error {
	var errs []error
	if os.Geteuid() != 0 {
		errs = append(errs, fmt.Errorf("netlab: not running as root (euid %d): creating network "+
			"namespaces, veths and nftables rules needs root; run the tests as root, e.g. "+
			"sudo -E go test ./internal/netlab/", os.Geteuid()))
	}
	if _, err := binary("ip"); err != nil {
		errs = append(errs, fmt.Errorf("%w; install iproute2: apt-get install -y iproute2", err))
	}
	if _, err := binary("nft"); err != nil {
		errs = append(errs, fmt.Errorf("%w; install nftables: apt-get update && apt-get install -y nftables", err))
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		errs = append(errs, fmt.Errorf("netlab: kernel without network namespace support "+
			"(CONFIG_NET_NS): %w", err))
	}
	return errors.Join(errs...)
}
