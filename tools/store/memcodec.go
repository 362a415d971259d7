package store

import (
	"bytes"
	"context"
	"io"
	"sync"

	"github.com/apache/thrift/lib/go/thrift"
)

// inMemory makes the operations ops of p decode their request and encode their reply in
// memory when the request came in a THeader frame of the binary protocol (the client's
// default): the frame's payload is read at once, the generated code decodes it from a
// buffer and encodes the reply into another, and the reply goes out in one THeader frame,
// byte for byte what the generated code writes through the header protocol. Every other
// request (compact, transformed or unframed payloads, other protocols) takes the
// generated path unchanged. The header protocol reads and writes a field at a time through
// several layers and allocates per field read; a batch of many items spends most of its
// time there, a single-key call little. cfg bounds sizes as on the connection.
func inMemory(p thrift.TProcessor, cfg *thrift.TConfiguration, ops ...string) thrift.TProcessor {
	for _, name := range ops {
		if fn, ok := p.ProcessorMap()[name]; ok {
			p.AddToProcessorMap(name, &memFunction{fn: fn, cfg: cfg})
		}
	}
	return p
}

// memFunction runs fn over in-memory buffers (see inMemory).
type memFunction struct {
	fn   thrift.TProcessorFunction
	cfg  *thrift.TConfiguration
	pool sync.Pool // *memCodec
}

// memCodec is one request's buffers and the binary protocols over them.
type memCodec struct {
	in, out   memTransport
	pin, pout *thrift.TBinaryProtocol
}

// maxPooledBuffer is the largest buffer a memCodec keeps for the next request.
const maxPooledBuffer = 1 << 20

func (f *memFunction) Process(ctx context.Context, seqID int32, in, out thrift.TProtocol) (bool, thrift.TException) {
	hp, ok := in.(*thrift.THeaderProtocol)
	if !ok || out != in {
		return f.fn.Process(ctx, seqID, in, out)
	}
	ht, ok := hp.Transport().(*thrift.THeaderTransport)
	if !ok || ht.Protocol() != thrift.THeaderProtocolBinary {
		return f.fn.Process(ctx, seqID, in, out)
	}
	n := ht.RemainingBytes()
	if n == 0 || n == thrift.UnknownRemainingBytes || n > uint64(f.cfg.GetMaxMessageSize()) {
		return f.fn.Process(ctx, seqID, in, out)
	}
	m, _ := f.pool.Get().(*memCodec)
	if m == nil {
		m = &memCodec{}
		m.pin = thrift.NewTBinaryProtocolConf(&m.in, f.cfg)
		m.pout = thrift.NewTBinaryProtocolConf(&m.out, f.cfg)
	}
	m.in.conn, m.out.conn = ht, ht
	defer f.release(m)
	if _, err := io.CopyN(&m.in.Buffer, ht, int64(n)); err != nil {
		return false, thrift.NewTTransportExceptionFromError(err)
	}
	ok, err := f.fn.Process(ctx, seqID, m.pin, m.pout)
	if m.out.Len() > 0 {
		ht.SequenceID = seqID
		_, werr := ht.Write(m.out.Bytes())
		if werr == nil {
			werr = ht.Flush(ctx)
		}
		if werr != nil {
			return false, thrift.WrapTException(werr)
		}
	}
	return ok, err
}

// release returns m to the pool, unless a buffer grew past maxPooledBuffer.
func (f *memFunction) release(m *memCodec) {
	m.in.conn, m.out.conn = nil, nil
	if m.in.Cap() > maxPooledBuffer || m.out.Cap() > maxPooledBuffer {
		return
	}
	m.in.Reset()
	m.out.Reset()
	f.pool.Put(m)
}

// memTransport is a Thrift transport over a buffer. It reports the connection's state, so
// the generated code's check that the client is still there sees the connection.
type memTransport struct {
	bytes.Buffer
	conn thrift.TTransport
}

func (t *memTransport) IsOpen() bool                { return t.conn != nil && t.conn.IsOpen() }
func (t *memTransport) Open() error                 { return nil }
func (t *memTransport) Close() error                { return nil }
func (t *memTransport) Flush(context.Context) error { return nil }
func (t *memTransport) RemainingBytes() uint64      { return uint64(t.Len()) }
