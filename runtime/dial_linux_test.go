//go:build linux

package runtime

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The built-in dialer turns TCP keep-alive on, probing a connection idle for 30 s, so a
// pooled connection to a node that vanished without a FIN is found dead.
func TestSocketDialer_KeepAliveEvery30s(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	raw, err := socketDialer(Config{DialTimeout: 10 * time.Second})(context.Background(), ln.Addr().String())
	require.NoError(t, err)
	defer raw.Close()
	sc, err := raw.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	var on, idle int
	var errOn, errIdle error
	require.NoError(t, sc.Control(func(fd uintptr) {
		on, errOn = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
		idle, errIdle = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
	}))
	require.NoError(t, errOn)
	require.NoError(t, errIdle)
	assert.Equal(t, 1, on)
	assert.Equal(t, 30, idle)
}
