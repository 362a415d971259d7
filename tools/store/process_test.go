package store

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/tools/gen/zarispeer"
	"github.com/clustron/zaris-go/tools/store/control"
)

// proc is one zarisd process started by a test.
type proc struct {
	cmd    *exec.Cmd
	addr   string // the address it printed
	stderr *syncBuffer
	done   chan error // receives cmd.Wait's result
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// buildZarisd builds the zarisd command into a temporary directory.
func buildZarisd(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	require.NoError(t, err)
	bin := t.TempDir() + "/zarisd"
	out, err := exec.Command(gobin, "build", "-o", bin, "github.com/clustron/zaris-go/tools/zarisd").CombinedOutput()
	require.NoError(t, err, "go build zarisd: %s", out)
	return bin
}

// startProc starts zarisd with args and waits for the line naming its address.
func startProc(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), stderr: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd.Stderr = p.stderr
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		f := strings.Fields(l)
		require.NotEmpty(t, f, "zarisd %v printed no address; stderr:\n%s", args, p.stderr)
		p.addr = f[len(f)-1]
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		t.Fatalf("zarisd %v did not start; stderr:\n%s", args, p.stderr)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("zarisd %v stderr:\n%s", args, p.stderr)
		}
	})
	return p
}

// etcdArgs returns the flags that point a zarisd process at the test process's shared etcd,
// under a key prefix of its own cluster.
func etcdArgs(t *testing.T) []string {
	cli, prefix := control.ForTest(t)
	return []string{"--etcd-endpoints", strings.Join(cli.Endpoints(), ","), "--etcd-prefix", prefix}
}

// stop sends SIGTERM and requires a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.done:
		require.NoError(t, err, "zarisd did not exit cleanly on SIGTERM")
		p.done <- err
	case <-time.After(10 * time.Second):
		t.Fatal("zarisd did not exit on SIGTERM")
	}
}

// waitPeerMap polls the coordinator's map until cond holds.
func waitPeerMap(t *testing.T, admin *AdminClient, what string, cond func(*zarispeer.PeerMap) bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		pm, err := admin.PeerMap(ctx)
		return err == nil && cond(pm)
	}, 30*time.Second, 5*time.Millisecond, what)
}

// threeNodes is a coordinator and three nodes run as zarisd processes.
type threeNodes struct {
	co    *proc
	nodes []*proc // node id i is nodes[i-1]
	seeds []string
	admin *AdminClient
	// startNode starts a process of node id with the cluster's flags, on a new data port.
	startNode func(id int) *proc
}

// startThreeNodes starts a coordinator of 16 segments that fails a node over after
// failureTimeout, and three nodes, with extra flags for each process, and waits until the
// cluster is settled (settledThree).
func startThreeNodes(t *testing.T, failureTimeout string, extra ...string) *threeNodes {
	t.Helper()
	return startThreeNodesWith(t, failureTimeout, nil, extra...)
}

// startThreeNodesWith is startThreeNodes with nodeFlags given to the nodes only (restarted
// ones included).
func startThreeNodesWith(t *testing.T, failureTimeout string, nodeFlags []string, extra ...string) *threeNodes {
	t.Helper()
	bin := buildZarisd(t)
	etcd := etcdArgs(t)
	// A fixed port: should the coordinator's etcd session expire (a loaded machine), it
	// leads again on the address the nodes know.
	c := &threeNodes{co: startProc(t, bin, slices.Concat([]string{"coordinator", "--listen", stablePort(), "--nodes", "3",
		"--segments", "16", "--failure-timeout", failureTimeout}, extra, etcd)...)}
	c.startNode = func(id int) *proc {
		return startProc(t, bin, slices.Concat([]string{"node", "--id", strconv.Itoa(id), "--listen", "127.0.0.1:0",
			"--coordinator", c.co.addr}, nodeFlags, extra, etcd)...)
	}
	for id := 1; id <= 3; id++ {
		n := c.startNode(id)
		c.nodes = append(c.nodes, n)
		c.seeds = append(c.seeds, n.addr)
	}
	c.admin = DialCoordinator(c.co.addr, nil)
	t.Cleanup(func() { c.admin.Close() })
	waitPeerMap(t, c.admin, "the cluster did not come up", settledThree)
	return c
}

// settledThree reports whether pm has three nodes and every segment an owner, one replica
// and no learner.
func settledThree(pm *zarispeer.PeerMap) bool {
	for _, s := range pm.Segments {
		if s.Owner == nil || len(s.Replicas) != 1 || len(s.Learners) != 0 {
			return false
		}
	}
	return len(pm.Nodes) == 3
}

// restartNode replaces node id's killed process by a new one with the same id,
// which comes back empty and catches up, and waits until the cluster is settled again
// (settledThree). The old process is still cleaned up when the test ends.
func (c *threeNodes) restartNode(t *testing.T, id int32) {
	t.Helper()
	n := c.startNode(int(id))
	c.nodes[id-1], c.seeds[id-1] = n, n.addr
	waitPeerMap(t, c.admin, fmt.Sprintf("restarted node %d did not catch up", id), func(pm *zarispeer.PeerMap) bool {
		return settledThree(pm) && slices.ContainsFunc(pm.Nodes, func(pn *zarispeer.PeerNode) bool {
			return pn.ID == id && net.JoinHostPort(pn.Host, strconv.Itoa(int(pn.Port))) == n.addr
		})
	})
}

// waitFailedOver waits until no segment is owned by node id.
func (c *threeNodes) waitFailedOver(t *testing.T, id int32) {
	t.Helper()
	waitPeerMap(t, c.admin, fmt.Sprintf("node %d was not failed over", id), func(pm *zarispeer.PeerMap) bool {
		for _, s := range pm.Segments {
			if s.Owner == nil || *s.Owner == id {
				return false
			}
		}
		return true
	})
}

func TestProcess_KillNineNodeUnderLoadLosesNoAckedWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs zarisd processes")
	}
	c := startThreeNodes(t, "1s", "--log-level", "debug")
	w := startWorkload(t, c.seeds, 4)
	w.waitAcked(t, 50)
	victim := c.nodes[1]
	require.NoError(t, victim.cmd.Process.Kill()) // SIGKILL: no goodbye, sockets reset by the kernel
	c.waitFailedOver(t, 2)
	w.waitAcked(t, 50)
	w.finish(t)

	c.nodes[0].stop(t)
	c.nodes[2].stop(t)
	c.co.stop(t)
}

func TestProcess_StoppedNodeIsFailedOverAfterTheTimeoutAndRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs zarisd processes")
	}
	c := startThreeNodes(t, "500ms")
	w := startWorkload(t, c.seeds, 4)
	w.waitAcked(t, 50)
	// SIGSTOP: the process hangs but the kernel still accepts connections on its ports, so
	// only the failure timeout can fail it over.
	stopped := c.nodes[0]
	require.NoError(t, stopped.cmd.Process.Signal(syscall.SIGSTOP))
	c.waitFailedOver(t, 1)
	w.waitAcked(t, 50)
	require.NoError(t, stopped.cmd.Process.Signal(syscall.SIGCONT))
	// It hears nothing from the coordinator, registers again and catches up.
	waitPeerMap(t, c.admin, "the resumed node did not catch up", func(pm *zarispeer.PeerMap) bool {
		for _, s := range pm.Segments {
			if slices.Contains(s.Replicas, 1) {
				return settledThree(pm)
			}
		}
		return false
	})
	w.waitAcked(t, 50)
	w.finish(t)
}
