package control

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain stops the shared etcd after the tests and then fails on any goroutine left
// running, except the idle HTTP connections between the members of a multi-member cluster
// that etcd's peer transport keeps open past Close.
func TestMain(m *testing.M) {
	code := m.Run()
	CloseShared()
	if code == 0 {
		if err := goleak.Find(
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
			goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
		); err != nil {
			println("goroutines left after the tests:", err.Error())
			code = 1
		}
	}
	os.Exit(code)
}

func TestStartEmbedded_ServesAndCleansUp(t *testing.T) {
	e, err := StartEmbedded(EmbedConfig{NoFsync: true})
	require.NoError(t, err)
	dir := e.tempDir
	require.DirExists(t, dir)
	cli, err := Connect(context.Background(), e.Endpoints(), 5*time.Second)
	require.NoError(t, err)
	_, err = cli.Put(context.Background(), "k", "v")
	require.NoError(t, err)
	require.NoError(t, cli.Close())
	e.Close()
	require.NoDirExists(t, dir)
}

func TestConnect_UnreachableNamesTheEndpoints(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now
	_, err = Connect(context.Background(), []string{addr}, 300*time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), addr)
	assert.Contains(t, err.Error(), "unreachable")
}

// freeAddrs returns n loopback addresses with ports free a moment ago.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		out = append(out, l.Addr().String())
		defer l.Close()
	}
	return out
}

// Three coordinators each embed one member of a 3-member etcd cluster: it serves with all
// three, and keeps serving when one member is gone.
func TestStartEmbedded_ThreeMemberCluster(t *testing.T) {
	t.Parallel()
	addrs := freeAddrs(t, 6)
	peers := map[string]string{}
	for i := range 3 {
		peers[fmt.Sprintf("c%d", i+1)] = "http://" + addrs[3+i]
	}
	members := make([]*Embedded, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("c%d", i+1)
			members[i], errs[i] = StartEmbedded(EmbedConfig{Name: name, ClientURL: "http://" + addrs[i], PeerURL: peers[name],
				Peers: peers, Token: "three", NoFsync: true, Tick: 50 * time.Millisecond, Election: 500 * time.Millisecond})
		}()
	}
	wg.Wait()
	for i, m := range members {
		if m != nil {
			defer m.Close()
		}
		require.NoError(t, errs[i])
	}
	assert.Equal(t, []string{addrs[0]}, members[0].Endpoints())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := Connect(ctx, addrs[:3], 10*time.Second)
	require.NoError(t, err)
	defer cli.Close()
	status, err := cli.MemberList(ctx)
	require.NoError(t, err)
	assert.Len(t, status.Members, 3)
	_, err = cli.Put(ctx, "k", "1")
	require.NoError(t, err)

	members[0].Close()
	_, err = cli.Put(ctx, "k", "2")
	require.NoError(t, err, "two of three members are a quorum")
	resp, err := cli.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "2", string(resp.Kvs[0].Value))
}

func TestInitialCluster_SortedPairs(t *testing.T) {
	assert.Equal(t, "a=http://127.0.0.1:2380,b=http://127.0.0.1:2381",
		InitialCluster(map[string]string{"b": "http://127.0.0.1:2381", "a": "http://127.0.0.1:2380"}))
}

func TestStartEmbedded_PeerURLMustMatchTheInitialCluster(t *testing.T) {
	_, err := StartEmbedded(EmbedConfig{Name: "a", PeerURL: "http://127.0.0.1:1", Peers: map[string]string{"a": "http://127.0.0.1:2"}})
	require.Error(t, err)
	_, err = StartEmbedded(EmbedConfig{Name: "x", PeerURL: "http://127.0.0.1:1", Peers: map[string]string{"a": "http://127.0.0.1:1"}})
	require.Error(t, err)
}

func TestEmbedConfig_TimingsAndFsync(t *testing.T) {
	single, dir, err := embedConfig(EmbedConfig{NoFsync: true}, new(atomic.Bool))
	require.NoError(t, err)
	defer removeTemp(dir)
	assert.Equal(t, []uint{10, 100}, []uint{single.TickMs, single.ElectionMs}, "a single member starts fast")
	assert.True(t, single.UnsafeNoFsync)
	assert.Equal(t, "zaris=http://127.0.0.1:0", single.InitialCluster)

	peers := map[string]string{"a": "http://127.0.0.1:2380", "b": "http://127.0.0.1:2381", "c": "http://127.0.0.1:2382"}
	member, dir2, err := embedConfig(EmbedConfig{Name: "b", PeerURL: peers["b"], Peers: peers, Dir: t.TempDir()}, new(atomic.Bool))
	require.NoError(t, err)
	assert.Empty(t, dir2, "a given data directory is not temporary")
	assert.Equal(t, []uint{100, 1000}, []uint{member.TickMs, member.ElectionMs}, "etcd's defaults in a multi-member cluster")
	assert.False(t, member.UnsafeNoFsync)
	assert.Equal(t, InitialCluster(peers), member.InitialCluster)
}

// syncBuffer is a bytes.Buffer safe for etcd's goroutines.
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

// Closing a member logs no error: etcd's "setting up serving ... failed" for each server
// that stops is dropped once Close starts, and any other error then is a warning (closing
// just after the start, as here, makes etcd fail to update its storage version); an error
// before Close still shows.
func TestStartEmbedded_CloseLogsNoError(t *testing.T) {
	var log syncBuffer
	e, err := StartEmbedded(EmbedConfig{NoFsync: true, LogLevel: "info", logTo: &log})
	require.NoError(t, err)
	require.Contains(t, log.String(), `"level":"info"`, "the log goes to logTo")
	e.Close()
	assert.NotContains(t, log.String(), `"level":"error"`)
	assert.NotContains(t, log.String(), shutdownNoise)

	lg, err := etcdLogger("warn", &log, new(atomic.Bool))
	require.NoError(t, err)
	lg.Error(shutdownNoise)
	assert.Contains(t, log.String(), `"level":"error"`, "not closing: the error is logged")

	log = syncBuffer{}
	lg.Error(retriedError)
	assert.Contains(t, log.String(), `"level":"warn"`)
	assert.NotContains(t, log.String(), `"level":"error"`, "a retried error is a warning")
}
