//go:build !aix && !windows && !wasm && !plan9

package runtime

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// idleConnOK reports whether an idle connection is still open and quiet: the peer has
// not closed it and sent nothing unasked (a TLS close_notify, say). It peeks without
// blocking and consumes nothing.
func idleConnOK(c net.Conn) bool {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true // no way to tell: let the call find out
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var (
		rerr  error
		probe [1]byte
	)
	if err := rc.Read(func(fd uintptr) bool {
		_, _, rerr = syscall.Recvfrom(int(fd), probe[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); err != nil {
		return false
	}
	// Open and quiet is "would block". No error means a read would return at once: zero
	// bytes (the peer closed) or bytes nobody asked for; another error is a broken socket.
	return errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK)
}
