package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A coordinator with its embedded etcd, stopped by SIGTERM or SIGINT, exits 0 and logs no
// error: etcd's complaints about its own servers closing are not errors.
func TestProcess_CleanShutdownLogsNoError(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts zarisd")
	}
	bin := t.TempDir() + "/zarisd"
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(bin, "coordinator", "--listen", "127.0.0.1:0", "--nodes", "1",
				"--etcd-client-url", "http://127.0.0.1:0", "--etcd-peer-url", "http://127.0.0.1:0")
			stderr := &syncBuffer{}
			cmd.Stderr = stderr
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			done := make(chan error, 1)
			line := make(chan string, 1)
			go func() {
				l, _ := bufio.NewReader(stdout).ReadString('\n')
				line <- l
				done <- cmd.Wait()
			}()
			select {
			case l := <-line:
				require.Contains(t, l, "listening on", "stderr:\n%s", stderr.String())
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatal("the coordinator did not start")
			}
			require.NoError(t, cmd.Process.Signal(sig))
			select {
			case err := <-done:
				require.NoError(t, err, "exit status; stderr:\n%s", stderr.String())
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatal("the coordinator did not exit on " + sig.String())
			}
			assert.NotContains(t, stderr.String(), `"level":"error"`)
		})
	}
}

// syncBuffer is a strings.Builder safe to read while a process writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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
