package store

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// internalPorts returns the peer port of a node and the coordinator's port of c, by name,
// with the server behind each.
func internalPorts(c *Cluster) map[string]*server {
	return map[string]*server{
		"peer":        c.Node(c.Nodes()[0]).peer,
		"coordinator": c.Coordinator().srv,
	}
}

// dialMember connects to an internal port of c as a member (mutual TLS with c's credentials).
func dialMember(c *Cluster, addr string) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, c.Credentials().ClientTLS())
}

// TestInternalPorts_FrameOverTheLimitClosesAtOnce sends the peer and the coordinator port,
// as a member, the length of a 256 MiB - 1 frame and nothing more. Each closes the connection as soon as
// it read the length, as the data port does, rather than waiting for the body until its
// idle timeout (30 s, longer than the test waits).
func TestInternalPorts_FrameOverTheLimitClosesAtOnce(t *testing.T) {
	c := StartCluster(t, fastCluster())
	for name, srv := range internalPorts(c) {
		t.Run(name, func(t *testing.T) {
			conn, err := dialMember(c, srv.addr())
			require.NoError(t, err)
			defer conn.Close()
			var head [4]byte
			binary.BigEndian.PutUint32(head[:], 256<<20-1)
			_, err = conn.Write(head[:])
			require.NoError(t, err)
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
			_, err = conn.Read(make([]byte, 1))
			require.Error(t, err)
			require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the port waited for the frame's body")
		})
	}
}

// TestInternalPorts_HalfFrameFloodIsBounded opens 100 member connections to the peer and
// the coordinator port, each sending a frame of the port's largest size only in part (64 KiB of
// it), six times the bytes the port may buffer at once. By the port's own accounting it
// never holds more than its budget, it refuses the frames over it (closing their
// connections), it gives every byte back once the flood ends, and the cluster then serves.
func TestInternalPorts_HalfFrameFloodIsBounded(t *testing.T) {
	const budget = 1 << 20
	defer func(b int64) { internalBudget = b }(internalBudget)
	internalBudget = budget
	c := StartCluster(t, fastCluster())
	for name, srv := range internalPorts(c) {
		t.Run(name, func(t *testing.T) {
			b := srv.lim.budget
			before, _, _ := b.usage()
			var head [4]byte
			binary.BigEndian.PutUint32(head[:], uint32(srv.lim.maxRequest-1))
			body := make([]byte, 64<<10)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var conns []net.Conn
			for range 100 {
				wg.Go(func() {
					conn, err := dialMember(c, srv.addr())
					if err != nil {
						return
					}
					mu.Lock()
					conns = append(conns, conn)
					mu.Unlock()
					_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
					_, _ = conn.Write(append(head[:], body...))
				})
			}
			wg.Wait()
			require.Eventually(t, func() bool { _, _, refused := b.usage(); return refused > 0 },
				20*time.Second, time.Millisecond, "the port took the whole flood")
			_, peak, _ := b.usage()
			assert.LessOrEqual(t, peak, int64(budget))
			for _, conn := range conns {
				conn.Close()
			}
			require.Eventually(t, func() bool { used, _, _ := b.usage(); return used <= before+256<<10 },
				20*time.Second, time.Millisecond, "the flood's bytes were not given back")
		})
	}
	r := newRouter(c.Seeds())
	defer r.close()
	r.putKeys(t, 20)
}
