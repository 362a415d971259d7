package runtime

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// Limits of one Thrift message on a client connection. The store refuses keys and values
// past its own (much smaller) limits, so a bigger message is a broken or hostile peer.
const (
	maxMessageSize   = 16 << 20
	maxContainerSize = 1 << 20
)

// thriftConfig is the one TConfiguration every client connection uses. SocketTimeout stays
// zero: each attempt's timeout and the caller's context are enforced per call (see
// thriftConn.arm), because protocol reads retry past socket timeouts while their
// context is live.
func thriftConfig(cfg Config) *thrift.TConfiguration {
	strict := true
	headerProto := thrift.THeaderProtocolBinary
	return &thrift.TConfiguration{
		MaxMessageSize:     maxMessageSize,
		MaxFrameSize:       maxMessageSize,
		MaxContainerSize:   maxContainerSize,
		ConnectTimeout:     cfg.DialTimeout,
		TBinaryStrictRead:  &strict,
		TBinaryStrictWrite: &strict,
		THeaderProtocolID:  &headerProto,
	}
}

// DefaultDialer returns the built-in dialer for cfg: TCP with cfg.DialTimeout, TLS when
// cfg.TLS is set (handshake inside the dial timeout), then cfg.Protocol over cfg.Transport
// (framed on a buffered socket, or buffered alone; header frames itself), with one shared
// TConfiguration bounding message and frame sizes, and cfg.Service's client bound to it.
// It panics when cfg.Service is nil.
func DefaultDialer(cfg Config) Dialer {
	if cfg.Service == nil {
		panic("zaris: DefaultDialer needs Config.Service (WithService)")
	}
	tcfg := thriftConfig(cfg)
	newClient := cfg.Service.NewClient
	dialSocket := socketDialer(cfg)
	protocol, transport := cfg.Protocol, cfg.Transport
	idleCheck := cfg.idleCheck()
	return func(ctx context.Context, addr string) (Conn, error) {
		raw, err := dialSocket(ctx, addr)
		if err != nil {
			return nil, err
		}
		c, err := newThriftConn(raw, protocol, transport, tcfg, cfg.requestLimit, newClient)
		if err != nil {
			raw.Close()
			return nil, err
		}
		c.idleCheck = idleCheck
		return c, nil
	}
}

// socketDialer returns what DefaultDialer opens under the Thrift layers: a TCP connection
// within cfg.DialTimeout, wrapped in TLS (handshake done) when cfg.TLS is set.
func socketDialer(cfg Config) func(ctx context.Context, addr string) (net.Conn, error) {
	nd := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	tlsCfg, timeout := cfg.TLS, cfg.DialTimeout
	return func(ctx context.Context, addr string) (net.Conn, error) {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		raw, err := nd.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		if tlsCfg != nil {
			tc := tlsCfg
			if tc.ServerName == "" {
				tc = tc.Clone()
				tc.ServerName, _, _ = net.SplitHostPort(addr)
			}
			tconn := tls.Client(raw, tc)
			if err := tconn.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, fmt.Errorf("tls handshake: %w", err)
			}
			raw = tconn
		}
		return raw, nil
	}
}

// newThriftConn stacks the protocol and transport on raw and binds the generated client
// newClient makes; over framed binary and compact an operation with a Codec in that
// protocol is sent and read with it (thriftConn.codecCall). A request larger than limit's
// value (when set and positive: the map's MaxMessageBytes) is refused before any of it is
// written over framed binary, and over framed compact when it goes through a Codec.
func newThriftConn(raw net.Conn, p Protocol, t Transport, tcfg *thrift.TConfiguration, limit *atomic.Int64, newClient func(thrift.TClient) any) (*thriftConn, error) {
	sock := newSockTransport(raw)
	proto, err := stackProtocol(sock, p, t, tcfg)
	if err != nil {
		return nil, err
	}
	codec := codecWireOf(p, t)
	if codec == binaryCodec {
		proto = thriftbuf.NewFrames(proto, tcfg).ShareBinaries().LimitWrites(limit)
	}
	c := &thriftConn{
		raw:       raw,
		sock:      sock,
		client:    newClient(thrift.NewTStandardClient(proto, proto)),
		idleCheck: defaultIdleCheckAfter,
		codec:     codec,
		tcfg:      tcfg,
		limit:     limit,
	}
	c.stopCall, c.abortCall = c.endCall, c.abort
	return c, nil
}

// stackProtocol puts protocol p over transport t (framed or not; header frames itself) on trans.
func stackProtocol(trans thrift.TTransport, p Protocol, t Transport, tcfg *thrift.TConfiguration) (thrift.TProtocol, error) {
	if p != ProtocolHeader && t == TransportFramed {
		trans = thrift.NewTFramedTransportConf(trans, tcfg)
	}
	switch p {
	case ProtocolBinary:
		return thrift.NewTBinaryProtocolConf(trans, tcfg), nil
	case ProtocolCompact:
		return thrift.NewTCompactProtocolConf(trans, tcfg), nil
	case ProtocolJSON:
		return thrift.NewTJSONProtocol(trans), nil
	case ProtocolHeader:
		return thrift.NewTHeaderProtocolConf(trans, tcfg), nil
	}
	return nil, fmt.Errorf("zaris: unknown protocol %q", p)
}
