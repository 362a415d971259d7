//go:build aix || windows || wasm || plan9

package runtime

import "net"

// idleConnOK cannot look at the socket on this platform: a closed idle connection is
// found by the next call instead.
func idleConnOK(net.Conn) bool { return true }
