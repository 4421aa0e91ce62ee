// Command mqadmin is the operator tool for RocketMQ-compatible name servers and brokers; see
// mqadmin help. All logic lives in package rocketraft/admin.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"rocketraft/admin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := admin.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
