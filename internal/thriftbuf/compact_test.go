package thriftbuf

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// AppendCompactMessageBegin appends what the compact protocol's WriteMessageBegin writes, for
// every message type, sequence ids of every varint length and of either sign, and names
// short and long.
func TestAppendCompactMessageBegin_WritesAsTheCompactProtocol(t *testing.T) {
	ctx := context.Background()
	for _, typeID := range []thrift.TMessageType{thrift.CALL, thrift.REPLY, thrift.EXCEPTION, thrift.ONEWAY} {
		for _, seq := range []int32{0, 1, 127, 128, 1 << 20, math.MaxInt32, -1, math.MinInt32} {
			for _, name := range []string{"", "Get", strings.Repeat("n", 200)} {
				buf := thrift.NewTMemoryBuffer()
				p := thrift.NewTCompactProtocolConf(buf, nil)
				require.NoError(t, p.WriteMessageBegin(ctx, name, typeID, seq))
				require.NoError(t, p.Flush(ctx))
				got := AppendCompactMessageBegin([]byte{0xAB}, name, typeID, seq)
				assert.Equal(t, append([]byte{0xAB}, buf.Bytes()...), got, "type %d, seq %d, name of %d bytes", typeID, seq, len(name))
			}
		}
	}
}
