package runtime

import "net"

// NewThriftConnOver wraps raw in the built-in connection cfg's dialer would make over a
// dialed socket, so benchmarks can run the engine's socket path over an in-memory one.
func NewThriftConnOver(raw net.Conn, cfg Config) (Conn, error) {
	return newThriftConn(raw, cfg.Protocol, cfg.Transport, thriftConfig(cfg), nil, cfg.Service.NewClient)
}

// NewFakeClock returns a Clock whose time moves only when the test calls Advance.
var NewFakeClock = newFakeClock
