package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeBlock returns the first sh block of README.md.
func readmeBlock(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindSubmatch(b)
	require.NotNil(t, m, "README.md has no sh block")
	return string(m[1])
}

// freePorts maps each loopback port the script names to a free one, so the run does not
// depend on the README's ports being free on the machine.
func freePorts(t *testing.T, script string) map[string]string {
	t.Helper()
	ports := map[string]string{}
	for _, m := range regexp.MustCompile(`127\.0\.0\.1:(\d+)`).FindAllStringSubmatch(script, -1) {
		if _, ok := ports[m[1]]; ok {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ports[m[1]] = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		require.NoError(t, l.Close())
	}
	return ports
}

// The README's first block runs as written, on other ports: three coordinators with their
// embedded etcd members and three nodes in the background, then zaris wait, put and map,
// and ctl map; every command succeeds, and the processes, stopped with SIGTERM at the end,
// log no error.
func TestReadme_ClusterOfProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts six processes")
	}
	script := readmeBlock(t)
	const build = "go -C tools build -o ../bin/ ./zarisd ./zaris\n"
	require.True(t, strings.HasPrefix(script, build), "the block starts by building the commands:\n%s", script)
	tools, err := filepath.Abs("..")
	require.NoError(t, err)
	script = strings.TrimPrefix(script, build)

	// A port freePorts found free may be taken by another process before a command binds
	// it: the run is then made again on other ports, at most twice more.
	var stdout, stderr string
	for try := 1; ; try++ {
		stdout, stderr, err = runOnFreePorts(t, tools, script)
		if try == 3 || !strings.Contains(stderr, "address already in use") {
			break
		}
		t.Logf("a port was taken meanwhile; again on other ports:\n%s", stderr)
	}
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	out := stdout
	assert.Regexp(t, `ok: the cluster answers \(map epoch \d+, 3 nodes, 64 segments\)`, out)
	assert.Regexp(t, `\nok version=\d+\n`, out)
	assert.Contains(t, out, "epoch ")
	assert.NotContains(t, stderr, `"level":"error"`, "a clean shutdown logs no error")
}

// runOnFreePorts runs script, the README's block after its build command, in a directory
// of its own with the commands built from tools into its bin/, each loopback port it names
// mapped to a free one (zaris's seeds too), and stops its background processes with
// SIGTERM at the end.
func runOnFreePorts(t *testing.T, tools, script string) (stdout, stderr string, err error) {
	dir := t.TempDir()
	script = fmt.Sprintf("go -C %s build -o %s/bin/ ./zarisd ./zaris\n", tools, dir) + script
	ports := freePorts(t, script)
	script = regexp.MustCompile(`127\.0\.0\.1:(\d+)`).ReplaceAllStringFunc(script, func(s string) string {
		return "127.0.0.1:" + ports[strings.TrimPrefix(s, "127.0.0.1:")]
	})
	// zaris's default seeds are the README's node ports; point them at the new ones.
	seeds := []string{"127.0.0.1:" + ports["7001"], "127.0.0.1:" + ports["7002"], "127.0.0.1:" + ports["7003"]}
	// On exit, stop the background processes with SIGTERM and wait for them.
	script = "set -e\ntrap 'kill -TERM $(jobs -p) 2>/dev/null; wait' EXIT\n" + script

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ZARIS_SEEDS="+strings.Join(seeds, ","))
	cmd.WaitDelay = 10 * time.Second
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}
