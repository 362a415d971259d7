package runtime

import (
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A pooled connection keeps the buffer it encoded a request into for its next one up to
// maxKeptRequest bytes of capacity, and lets a larger one go (here the frame limit then
// refuses the request before anything is written).
func TestWriteCodec_KeepsRequestBuffersUpToTheBound(t *testing.T) {
	op := &Op{Name: "Put", Codec: &Codec{AppendArgs: func(b []byte, _ any) []byte { return append(b, 0) }}}
	for _, tc := range []struct {
		capacity int
		kept     bool
	}{{4096, true}, {maxKeptRequest, true}, {maxKeptRequest + 1, false}} {
		c := &thriftConn{tcfg: &thrift.TConfiguration{MaxFrameSize: 1}, wire: make([]byte, 0, tc.capacity)}
		require.Error(t, c.writeCodec(op, nil), "over the frame limit of 1 byte")
		assert.Equal(t, tc.kept, c.wire != nil, "a buffer of %d bytes", tc.capacity)
	}
}
