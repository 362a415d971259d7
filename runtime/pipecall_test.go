package runtime

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// A pipelined request is encoded through thriftbuf.Frames on a framed binary connection,
// the default; through the protocol as it is on every other. An operation's Codec is used
// on framed binary and compact connections alone, in their protocol.
func TestPipelinedCall_FramedBinaryEncodesThroughFrames(t *testing.T) {
	for _, p := range []Protocol{ProtocolBinary, ProtocolCompact, ProtocolJSON, ProtocolHeader} {
		for _, tr := range []Transport{TransportFramed, TransportBuffered} {
			cfg, err := NewConfig(WithService(testService), WithEnv(env(nil)), WithSeeds("127.0.0.1:1"), WithProtocol(p), WithTransport(tr))
			require.NoError(t, err)
			ps := newPipelines(cfg)
			_, frames := ps.getCall().out.(*thriftbuf.Frames)
			assert.Equal(t, p == ProtocolBinary && tr == TransportFramed, frames, "%s over %s", p, tr)
			want := map[Protocol]codecWire{ProtocolBinary: binaryCodec, ProtocolCompact: compactCodec}[p]
			if tr != TransportFramed {
				want = noCodec
			}
			assert.Equal(t, want, ps.codec, "the Codec, %s over %s", p, tr)
		}
	}
}

// A pcall given back keeps its request buffer for its next call up to maxKeptRequest
// bytes of capacity, and lets a larger one go.
func TestPutCall_KeepsRequestBuffersUpToTheBound(t *testing.T) {
	ps := &pipelines{}
	for _, tc := range []struct {
		capacity int
		kept     bool
	}{{4096, true}, {maxKeptRequest, true}, {maxKeptRequest + 1, false}, {4 * maxKeptRequest, false}} {
		p := &pcall{wire: make([]byte, 0, tc.capacity)}
		ps.putCall(p)
		assert.Equal(t, tc.kept, p.wire != nil, "a buffer of %d bytes", tc.capacity)
	}
}
