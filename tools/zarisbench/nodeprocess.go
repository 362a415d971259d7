package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"
)

// The client section (9) measures the client alone: its node, a one-node store, and the
// floor's echo server run in a child process (this program, started with nodeEnv set), so
// this process's CPU time, heap allocations and write syscalls are the client's, and the
// child reports its own CPU time on request.

// nodeEnv, set in a child's environment, makes this program serve a node (serveNode)
// instead of measuring.
const nodeEnv = "ZARISBENCH_NODE"

// nodeHello is the first line the child writes: where its node and its echo server are.
type nodeHello struct {
	Seeds []string `json:"seeds"`
	Echo  string   `json:"echo"`
	Err   string   `json:"err,omitempty"`
}

// serveNode runs the child's side: it starts a one-node store and an echo server, writes
// their addresses as a nodeHello line on stdout, then answers each line on stdin with its
// process's CPU nanoseconds so far, until stdin ends. It returns the exit code.
func serveNode() int {
	ctx := context.Background()
	out := bufio.NewWriter(os.Stdout)
	hello := func(h nodeHello) {
		b, _ := json.Marshal(h)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	cluster, err := startCluster(ctx, 1, 1)
	if err != nil {
		hello(nodeHello{Err: err.Error()})
		return 1
	}
	defer cluster.Close()
	echo, err := startEcho()
	if err != nil {
		hello(nodeHello{Err: err.Error()})
		return 1
	}
	defer echo.Close()
	hello(nodeHello{Seeds: cluster.Seeds(), Echo: echo.Addr().String()})
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fmt.Fprintf(out, "%d\n", cpuTime().Nanoseconds())
		out.Flush()
	}
	return 0
}

// nodeProcess is the parent's handle on the child.
type nodeProcess struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	hello nodeHello
}

// startNode starts the child and waits for its hello.
func startNode(ctx context.Context) (*nodeProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), nodeEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	n := &nodeProcess{cmd: cmd, in: in, out: bufio.NewReader(outPipe)}
	line, err := n.out.ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &n.hello)
	}
	if err == nil && n.hello.Err != "" {
		err = fmt.Errorf("%s", n.hello.Err)
	}
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("the node process: %v (%s)", err, strings.TrimSpace(stderr.String()))
	}
	return n, nil
}

// cpu is the child's CPU time so far.
func (n *nodeProcess) cpu() (time.Duration, error) {
	if _, err := io.WriteString(n.in, "cpu\n"); err != nil {
		return 0, err
	}
	line, err := n.out.ReadString('\n')
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	return time.Duration(ns), err
}

// Close ends the child: its stdin closes, it closes its node and exits.
func (n *nodeProcess) Close() error {
	n.in.Close()
	return n.cmd.Wait()
}

// splitRun is one timed load seen from both processes.
type splitRun struct {
	Ops      int     `json:"ops"`
	OpsPerS  float64 `json:"opsPerSec"`
	ClientUs float64 `json:"clientMicrosPerCall"` // this process's CPU per call
	NodeUs   float64 `json:"nodeMicrosPerCall"`   // the child's CPU per call
	Allocs   float64 `json:"clientAllocsPerCall"`
	Bytes    float64 `json:"clientBytesPerCall"`
	// PerRoundTrip is calls per pair of socket syscalls of this process (a write and a
	// read: 2 x calls / (reads + writes)): how many requests a round trip of the floor
	// carries at the same cost in syscalls.
	PerRoundTrip float64 `json:"callsPerRoundTrip"`
}

// measureSplit runs load and returns its cost per call on each side.
func measureSplit(node *nodeProcess, load func() (loadResult, error)) (splitRun, error) {
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	n0, err := node.cpu()
	if err != nil {
		return splitRun{}, err
	}
	r0, w0 := ioSyscalls()
	c0 := cpuTime()
	r, err := load()
	c1 := cpuTime()
	r1, w1 := ioSyscalls()
	n1, nerr := node.cpu()
	goruntime.ReadMemStats(&after)
	if err == nil {
		err = nerr
	}
	if err != nil {
		return splitRun{}, err
	}
	if r.Errors > 0 {
		return splitRun{}, fmt.Errorf("%d errors, the first: %s", r.Errors, r.FirstError)
	}
	n := float64(max(r.Ops, 1))
	return splitRun{
		Ops: r.Ops, OpsPerS: r.OpsPerS,
		ClientUs:     float64((c1 - c0).Nanoseconds()) / 1e3 / n,
		NodeUs:       float64((n1 - n0).Nanoseconds()) / 1e3 / n,
		Allocs:       float64(after.Mallocs-before.Mallocs) / n,
		Bytes:        float64(after.TotalAlloc-before.TotalAlloc) / n,
		PerRoundTrip: ratio(2*n, float64(r1-r0+w1-w0)),
	}, nil
}

// ioSyscalls is the read and write system calls this process has made (syscr and syscw
// of /proc/self/io), 0 where the kernel does not tell.
func ioSyscalls() (reads, writes int64) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	return reads, writes
}
