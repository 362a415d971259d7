package runtime

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/internal/thriftbuf"
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
		require.Error(t, c.writeCodec(op, op.Codec, nil), "over the frame limit of 1 byte")
		assert.Equal(t, tc.kept, c.wire != nil, "a buffer of %d bytes", tc.capacity)
	}
}

// A pooled connection keeps the buffer it read a reply's body into for its next reply up
// to maxKeptReply bytes of capacity, and lets a larger one go.
func TestReadReply_KeepsReplyBuffersUpToTheBound(t *testing.T) {
	op := &Op{Name: "Get"}
	msg := append(thriftbuf.AppendMessageBegin(nil, "Get", thrift.REPLY, 1), 0) // an empty result
	frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...)
	for _, tc := range []struct {
		capacity int
		kept     bool
	}{{4096, true}, {maxKeptReply, true}, {maxKeptReply + 1, false}} {
		c := &thriftConn{tcfg: &thrift.TConfiguration{}, seq: 1, body: make([]byte, 0, tc.capacity),
			sock: &sockTransport{r: bufio.NewReader(bytes.NewReader(frame))}}
		body, err := c.readReply(op, true)
		require.NoError(t, err)
		assert.Equal(t, []byte{0}, body)
		assert.Equal(t, tc.kept, c.body != nil, "a buffer of %d bytes", tc.capacity)
	}
}

// A reply frame of exactly the frame limit is read; one byte over it fails the read, as
// the framed transport fails it.
func TestReadReply_FrameLimit(t *testing.T) {
	op := &Op{Name: "Get"}
	msg := append(thriftbuf.AppendMessageBegin(nil, "Get", thrift.REPLY, 1), 0)
	frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...)
	read := func(limit int) error {
		c := &thriftConn{tcfg: &thrift.TConfiguration{MaxFrameSize: int32(limit)}, seq: 1,
			sock: &sockTransport{r: bufio.NewReader(bytes.NewReader(frame))}}
		_, err := c.readReply(op, true)
		return err
	}
	assert.NoError(t, read(len(msg)), "a frame of exactly the limit")
	assert.ErrorContains(t, read(len(msg)-1), "Incorrect frame size")
}
