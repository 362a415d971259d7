package runtime

import "net"

// NewThriftConnOver wraps raw in the built-in connection cfg's dialer would make over a
// dialed socket, so benchmarks can run the engine's socket path over an in-memory one.
func NewThriftConnOver(raw net.Conn, cfg Config) (Conn, error) {
	c, err := newThriftConn(raw, cfg.Protocol, cfg.Transport, thriftConfig(cfg), nil, cfg.Service.NewClient)
	if err != nil {
		return nil, err
	}
	c.idleCheck = cfg.idleCheck()
	return c, nil
}

// PipelineEveryCall is an Option that sends every call of a pipelined engine over a
// pipelined connection, even one alone in flight to its node (Config.pipelineEveryCall).
func PipelineEveryCall() Option {
	return optionFunc(func(b *configBuilder) { b.cfg.pipelineEveryCall = true })
}

// NewFakeClock returns a Clock whose time moves only when the test calls Advance.
var NewFakeClock = newFakeClock
