package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/runtime/clustermap"
)

// runOutput is what one in-process run of zaris produced.
type runOutput struct {
	code   int
	stdout string
	stderr string
}

// runZaris runs the command line in-process with env as the whole environment and an empty
// stdin.
func runZaris(t *testing.T, env map[string]string, args ...string) runOutput {
	t.Helper()
	return runZarisStdin(t, env, strings.NewReader(""), args...)
}

// runZarisStdin runs the command line in-process as runZaris does, with stdin.
func runZarisStdin(t *testing.T, env map[string]string, stdin io.Reader, args ...string) runOutput {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, stdin, &stdout, &stderr, func(name string) string { return env[name] })
	return runOutput{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// jsonResult decodes the one JSON object of a --json run.
func jsonResult(t *testing.T, o runOutput) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewBufferString(o.stdout))
	require.NoError(t, dec.Decode(&m), "stdout: %q, stderr: %q", o.stdout, o.stderr)
	require.False(t, dec.More(), "more than one JSON value on stdout: %q", o.stdout)
	return m
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// keyIn returns a key that falls in segment seg of a segCount-segment map.
func keyIn(seg, segCount int32, prefix string) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s-%d", prefix, i)
		if clustermap.SegmentOf([]byte(k), segCount) == seg {
			return k
		}
	}
}
