package runtime

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
)

// stallingConn returns a pipelined connection, over the buffered (unframed) binary
// transport, to a node that answers each request with the start of a reply and sends the
// rest only once finish is closed; the reader then waits for the rest mid-reply.
func stallingConn(t *testing.T) (ps *pipelines, conn *pipeConn, finish chan struct{}) {
	finish = make(chan struct{})
	addr := serveLoopback(t, func(c net.Conn) { serveStalling(c, finish) })
	ps, conn = openPipeConn(t, addr, WithTransport(TransportBuffered))
	return ps, conn, finish
}

func serveStalling(c net.Conn, finish <-chan struct{}) {
	cfg := &thrift.TConfiguration{}
	proto := thrift.NewTBinaryProtocolConf(thrift.NewTSocketFromConnConf(c, cfg), cfg)
	ctx := context.Background()
	for {
		name, _, seq, err := proto.ReadMessageBegin(ctx)
		if err != nil {
			return
		}
		var args zaris.ZarisKvGetArgs
		if args.Read(ctx, proto) != nil || proto.ReadMessageEnd(ctx) != nil {
			return
		}
		_ = proto.WriteMessageBegin(ctx, name, thrift.REPLY, seq)
		if proto.Flush(ctx) != nil {
			return
		}
		<-finish
		res := zaris.ZarisKvGetResult{Success: &zaris.GetResponse{Status: zaris.KvStatus_NotFound, MapEpoch: 1}}
		_ = res.Write(ctx, proto)
		_ = proto.WriteMessageEnd(ctx)
		if proto.Flush(ctx) != nil {
			return
		}
	}
}

// TestPipelineSweep_EndsAnAttemptWhoseReplyStallsMidway: a caller whose context cannot
// end waits on its reply alone, so when its reply stops arriving halfway (the reader has
// taken the request off the connection and waits for the rest), the sweep at its deadline
// must still end its attempt and tell it. With the attempt timeout and no reply at all
// since the request was written, the connection fails; with the call's own deadline it
// stays open, and the late rest of the reply is read and dropped.
func TestPipelineSweep_EndsAnAttemptWhoseReplyStallsMidway(t *testing.T) {
	for _, callBound := range []bool{false, true} {
		t.Run(map[bool]string{false: "attempt timeout", true: "call deadline"}[callBound], func(t *testing.T) {
			ps, conn, finish := stallingConn(t)
			deadline := time.Now().Add(time.Hour) // only the sweep below, at an injected time, reaches it
			p, ended := getOnConn(ps, conn, "stall", deadline, callBound)
			eventually(t, func() bool { return p.state.Load() == stReading })

			require.True(t, conn.sweep(deadline))
			select {
			case err := <-ended:
				require.ErrorIs(t, err, context.DeadlineExceeded)
			case <-time.After(10 * time.Second): // a hang detector, not a timing assertion
				t.Fatal("the sweep did not tell the caller whose reply stalled")
			}
			assert.True(t, p.wasSent, "its request was written")
			assert.Equal(t, !callBound, p.timedOut)
			assert.True(t, p.abandoned, "the connection may still hold it: never reused")
			if !callBound {
				assert.ErrorIs(t, conn.failure(), errNoReply)
				eventually(t, func() bool { return conn.pending.Load() == 0 })
				return
			}
			assert.NoError(t, conn.failure())
			close(finish)
			eventually(t, func() bool { return conn.pending.Load() == 0 })
			resp, err, sent := getOn(ps, conn, "after")
			require.NoError(t, err, "the connection stays open")
			assert.True(t, sent)
			assert.Equal(t, zaris.KvStatus_NotFound, kvStatus(resp))
			assert.Equal(t, uint64(2), conn.replies.Load())
		})
	}
}
