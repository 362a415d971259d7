package main

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/tools/store"
)

func TestRun_RejectsBadCommandLines(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "usage"},
		{"unknown command", []string{"serve"}, `unknown command "serve"`},
		{"node without an id", []string{"node", "--coordinator", "127.0.0.1:1"}, "node id must be positive"},
		{"node with bad etcd endpoints", []string{"node", "--id", "1", "--etcd-endpoints", "nohost"}, `etcd endpoint "nohost": want host:port`},
		{"node with an unknown protocol", []string{"node", "--id", "1", "--protocol", "xml"}, `unknown protocol "xml"`},
		{"node with a negative dedup window", []string{"node", "--id", "1", "--dedup-window", "-1s"}, "--dedup-window -1s is negative"},
		{"node with a key but no certificate", []string{"node", "--id", "1", "--tls-key", "k.pem"}, "--tls-cert and --tls-key go together"},
		{"coordinator timeout below heartbeat", []string{"coordinator", "--listen", "127.0.0.1:0", "--etcd-client-url", "http://127.0.0.1:0", "--heartbeat", "1s", "--failure-timeout", "10ms"}, "shorter than the heartbeat"},
		{"ctl without a command", []string{"ctl"}, "usage"},
		{"ctl failback without a node", []string{"ctl", "failback"}, "failback takes 1 argument(s)"},
		{"ctl migrate with a word", []string{"ctl", "migrate", "1", "x"}, `"x" is not a number`},
		{"ctl unknown command", []string{"ctl", "explode"}, `unknown ctl command "explode"`},
		{"bad log level", []string{"coordinator", "--log-level", "loud"}, "bad --log-level"},
		{"coordinator on every address without credentials", []string{"coordinator", "--listen", "0.0.0.0:7000"}, "protected mode: --listen 0.0.0.0:7000 is not a loopback address"},
		{"embedded etcd on every address without credentials", []string{"coordinator", "--etcd-client-url", "http://0.0.0.0:2379"}, "protected mode: --etcd-client-url 0.0.0.0:2379"},
		{"node peer port on every address without credentials", []string{"node", "--id", "1", "--peer-listen", ":7101"}, "protected mode: --peer-listen :7101"},
		{"node with a CA but no member certificate", []string{"node", "--id", "1", "--cluster-ca", "ca.pem"}, "--cluster-ca, --member-cert and --member-key go together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(tt.args, &out, &errOut)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// A coordinator whose etcd does not answer exits with an error naming the endpoints.
func TestRun_CoordinatorExitsWhenEtcdIsUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there any more
	var out, errOut bytes.Buffer
	err = run([]string{"coordinator", "--listen", "127.0.0.1:0", "--etcd-endpoints", dead, "--etcd-dial-timeout", "300ms"}, &out, &errOut)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "etcd at "+dead+" unreachable")
	assert.Empty(t, out.String(), "it must not say it listens")
}

// A coordinator without credentials says first that it runs in protected mode.
func TestRun_ProtectedModeIsTheFirstLogLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	var out, errOut bytes.Buffer
	err = run([]string{"coordinator", "--listen", "127.0.0.1:0", "--etcd-endpoints", dead, "--etcd-dial-timeout", "100ms"}, &out, &errOut)
	require.Error(t, err)
	first, _, _ := strings.Cut(errOut.String(), "\n")
	assert.Contains(t, first, "protected mode: no cluster credentials")
}

// certs writes a CA and member certificates that make credentials.
func TestRun_CertsWritesCredentials(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, run([]string{"certs", "--dir", dir, "a", "b"}, &out, &out))
	for _, name := range []string{"a", "b"} {
		_, err := store.LoadCredentials(dir+"/ca.pem", dir+"/"+name+".pem", dir+"/"+name+"-key.pem")
		require.NoError(t, err)
	}
}

func TestRun_HelpPrintsUsage(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run([]string{"help"}, &out, &out))
	assert.True(t, strings.HasPrefix(out.String(), "usage:"))
}
