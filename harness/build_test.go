package harness

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// TestFreeAddrSkipsAPortAnotherProcessReserved: a port another test process was given but
// has not bound yet (its service is still starting) is not handed out again here.
func TestFreeAddrSkipsAPortAnotherProcessReserved(t *testing.T) {
	if os.Getenv("HARNESS_RESERVE_CHILD") == "1" {
		addr, err := FreeAddr()
		if err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString(addr + "\n")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // hold the reservation until told
		os.Exit(0)
	}
	child := exec.Command(os.Args[0], "-test.run", "^TestFreeAddrSkipsAPortAnotherProcessReserved$")
	child.Env = append(os.Environ(), "HARNESS_RESERVE_CHILD=1")
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = child.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the child's port: %v", err)
	}
	_, p, err := net.SplitHostPort(line[:len(line)-1])
	if err != nil {
		t.Fatal(err)
	}
	theirs, _ := strconv.Atoi(p)

	portMu.Lock()
	nextPort = theirs - 1 // our next try is exactly the child's port
	portMu.Unlock()
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	if addr == line[:len(line)-1] {
		t.Fatalf("%s was handed out twice", addr)
	}
}

// TestFreeAddrWrapsToTheBottomOfTheRange: a process whose offset falls near the top of
// the range still has the whole range — past the top it continues at the bottom, not at
// its offset again (which left a process starting at 24500 only 500 ports: CI ran out).
func TestFreeAddrWrapsToTheBottomOfTheRange(t *testing.T) {
	portMu.Lock()
	nextPort = portHigh - 2
	portMu.Unlock()
	var ports []int
	for range 4 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, p)
	}
	last := ports[len(ports)-1]
	if last >= portLow+100 {
		t.Fatalf("ports %v: after the top of the range the next ones should come from its bottom (%d…)", ports, portLow)
	}
}
