package store

import (
	"context"
	"sync"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// inMemory makes the operations ops of p decode their request and encode their reply in
// memory when the request came from a THeader client in a binary frame: the frame's payload
// is read at once, the generated code decodes it from a buffer and encodes the reply into
// another (internal/thriftbuf), and the reply goes out in one frame, byte for byte what the
// generated code writes through the header protocol. (A framed binary client, the client's
// default, is served in memory for every operation by the node's own protocol, framedBinary.)
// Every other request takes the generated path unchanged. The header protocol reads and
// writes a field at a time through several layers and allocates per field read; a batch of
// many items spends most of its time there, a single-key call little. cfg bounds sizes as
// on the connection.
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
	pool sync.Pool // *thriftbuf.Protocol
}

func (f *memFunction) Process(ctx context.Context, seqID int32, in, out thrift.TProtocol) (bool, thrift.TException) {
	if out != in {
		return f.fn.Process(ctx, seqID, in, out)
	}
	hp, ok := in.(*thrift.THeaderProtocol)
	if !ok {
		return f.fn.Process(ctx, seqID, in, out)
	}
	frame, ok := hp.Transport().(*thrift.THeaderTransport)
	if !ok || frame.Protocol() != thrift.THeaderProtocolBinary {
		return f.fn.Process(ctx, seqID, in, out)
	}
	n := frame.RemainingBytes()
	if n == 0 || n == thrift.UnknownRemainingBytes || n > uint64(f.cfg.GetMaxMessageSize()) {
		return f.fn.Process(ctx, seqID, in, out)
	}
	p, _ := f.pool.Get().(*thriftbuf.Protocol)
	if p == nil {
		p = thriftbuf.New(f.cfg)
	}
	p.Reset(frame) // the generated code's check that the client is still there asks frame
	defer func() {
		p.Reset(nil)
		f.pool.Put(p)
	}()
	if err := p.Fill(frame, int(n)); err != nil {
		return false, thrift.NewTTransportExceptionFromError(err)
	}
	ok, err := f.fn.Process(ctx, seqID, p, p)
	if reply := p.Bytes(); len(reply) > 0 {
		frame.SequenceID = seqID
		_, werr := frame.Write(reply)
		if werr == nil {
			werr = frame.Flush(ctx)
		}
		if werr != nil {
			return false, thrift.WrapTException(werr)
		}
	}
	return ok, err
}
