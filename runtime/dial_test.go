package runtime

import (
	"context"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// The built-in dialer bounds the TLS handshake by DialTimeout too, not only the TCP dial:
// a node that accepts and never answers the handshake fails the dial within DialTimeout,
// not when the caller gives up.
func TestSocketDialer_TLSHandshakeWithinDialTimeout(t *testing.T) {
	_, clientTLS := selfSignedTLS(t)
	addr := silentSeed(t, make(chan net.Conn, 1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watchdog := time.AfterFunc(10*time.Second, cancel) // the caller gives up: the dial was not bound
	defer watchdog.Stop()
	_, err := socketDialer(Config{DialTimeout: 50 * time.Millisecond, TLS: clientTLS})(ctx, addr)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NoError(t, ctx.Err(), "the dial ended when the caller gave up, not at DialTimeout")
}

// A Config built by hand with DialTimeout 0 gives a dialer without a bound, as net.Dialer's
// zero Timeout does (NewConfig refuses a zero DialTimeout).
func TestSocketDialer_ZeroDialTimeoutIsNoBound(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	raw, err := socketDialer(Config{})(context.Background(), ln.Addr().String())
	require.NoError(t, err)
	raw.Close()
}

// A framed binary connection, the default, reads each reply frame whole into memory and
// carves the reply's binaries from it (thriftbuf.Frames); the other protocols and
// transports read through the protocol as it is, as does binary over the buffered
// transport, whose messages have no length to read ahead.
func TestNewThriftConn_FramedBinaryReadsFramesWhole(t *testing.T) {
	cfg, err := NewConfig(WithService(testService), WithEnv(env(nil)), WithSeeds("127.0.0.1:1"))
	require.NoError(t, err)
	for _, p := range []Protocol{ProtocolBinary, ProtocolCompact, ProtocolJSON, ProtocolHeader} {
		for _, tr := range []Transport{TransportFramed, TransportBuffered} {
			var client thrift.TClient
			_, err := newThriftConn(&deadlineConn{}, p, tr, thriftConfig(cfg), nil, func(c thrift.TClient) any { client = c; return c })
			require.NoError(t, err)
			// The protocol the client reads replies with (TStandardClient's iprot).
			iprot := reflect.ValueOf(client).Elem().FieldByName("iprot").Elem().Type()
			want := p == ProtocolBinary && tr == TransportFramed
			assert.Equal(t, want, iprot == reflect.TypeFor[*thriftbuf.Frames](), "%s over %s reads with %v", p, tr, iprot)
		}
	}
}
