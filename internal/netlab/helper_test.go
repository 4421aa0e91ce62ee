package netlab

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// helperEnv makes the re-executed test binary act as a helper program instead of running tests.
const helperEnv = "NETLAB_TEST_HELPER"

// TestHelperProcess is not a test: tests start the test binary itself inside a host with
// Host.Command and this function turns it into a tiny server or client, selected by the
// arguments after "--":
//
//	listen ADDR  print "ready PID ADDR", then greet every connection with "hello PID"; exit on stdin EOF
//	dial ADDR    connect with a 1 s timeout, print the greeting, exit 1 on error
//	exit         exit at once (a PID that is known to be dead afterwards)
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		return
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(helperMain(args))
}

func helperMain(args []string) int {
	switch {
	case len(args) == 2 && args[0] == "listen":
		return helperListen(args[1])
	case len(args) == 2 && args[0] == "dial":
		return helperDial(args[1])
	case len(args) == 1 && args[0] == "exit":
		return 0
	}
	fmt.Fprintf(os.Stderr, "helper: bad arguments %q\n", args)
	return 2
}

func helperListen(addr string) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	fmt.Printf("ready %d %s\n", os.Getpid(), ln.Addr())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		fmt.Fprintf(c, "hello %d\n", os.Getpid())
		c.Close()
	}
}

func helperDial(addr string) int {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Print(line)
	return 0
}
