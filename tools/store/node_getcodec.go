package store

import (
	"context"
	"sync"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zariscodec"
	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// codecGet serves a Get whose request body is held in memory (a framed binary client,
// thriftbuf.Frames, or a framed compact one, frameTransport) with the generated codec
// (gen/zariscodec) of its protocol: the request is decoded from the body where it lies, the
// key a slice of it for the lookup only, and the reply is encoded in one append, byte for
// byte the generated processor's reply (TestCodecGet_RepliesAsTheGeneratedCode). Without the generated processor's connectivity
// check, which a lookup that never waits does not need, a Get costs no goroutine. A body
// the codec cannot decode, and every request of another format, goes to fn, the generated
// processor function, unread, which answers it as before.
type codecGet struct {
	h   *kvHandler
	fn  thrift.TProcessorFunction
	cfg *thrift.TConfiguration
	buf sync.Pool // *[]byte: a reply being encoded
}

// serveGetWithCodec puts codecGet in front of p's Get; cfg bounds sizes as on the connection.
func serveGetWithCodec(p thrift.TProcessor, h *kvHandler, cfg *thrift.TConfiguration) thrift.TProcessor {
	if fn, ok := p.ProcessorMap()["Get"]; ok {
		p.AddToProcessorMap("Get", &codecGet{h: h, fn: fn, cfg: cfg})
	}
	return p
}

func (f *codecGet) Process(ctx context.Context, seqID int32, in, out thrift.TProtocol) (bool, thrift.TException) {
	if out != in {
		return f.fn.Process(ctx, seqID, in, out)
	}
	if compact, ok := in.(*thrift.TCompactProtocol); ok {
		return f.processCompact(ctx, seqID, compact)
	}
	fr, ok := in.(*thriftbuf.Frames)
	if !ok {
		return f.fn.Process(ctx, seqID, in, out)
	}
	body := fr.Memory()
	if body == nil {
		return f.fn.Process(ctx, seqID, in, out)
	}
	var args zaris.ZarisKvGetArgs
	if _, err := zariscodec.DecodeZarisKvGetArgs(body.Unread(), &args, f.cfg); err != nil {
		return f.fn.Process(ctx, seqID, in, out)
	}
	if err := fr.ReadMessageEnd(ctx); err != nil {
		return false, thrift.WrapTException(err)
	}
	resp, _ := f.h.Get(ctx, args.Req) // it never fails
	if err := fr.WriteMessageBegin(ctx, "Get", thrift.REPLY, seqID); err != nil {
		return false, thrift.WrapTException(err)
	}
	bp, _ := f.buf.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	result := zaris.ZarisKvGetResult{Success: resp}
	*bp = zariscodec.AppendZarisKvGetResult((*bp)[:0], &result)
	_, err := fr.Memory().Transport().Write(*bp)
	if cap(*bp) <= 64<<10 {
		f.buf.Put(bp)
	}
	if err != nil {
		return false, thrift.WrapTException(err)
	}
	if err := fr.WriteMessageEnd(ctx); err != nil {
		return false, thrift.WrapTException(err)
	}
	if err := fr.Flush(ctx); err != nil {
		return false, thrift.WrapTException(err)
	}
	return true, nil
}

// processCompact is Process for a framed compact client (frameTransport): the request is
// decoded from the rest of its frame where it lies, and the reply's result appended in one
// go behind the message header the compact protocol writes. A body the codec cannot decode
// goes to fn unread.
func (f *codecGet) processCompact(ctx context.Context, seqID int32, p *thrift.TCompactProtocol) (bool, thrift.TException) {
	ft, ok := p.Transport().(*frameTransport)
	if !ok {
		return f.fn.Process(ctx, seqID, p, p)
	}
	var args zaris.ZarisKvGetArgs
	n, err := zariscodec.DecodeCompactZarisKvGetArgs(ft.Unread(), &args, f.cfg)
	if err != nil {
		return f.fn.Process(ctx, seqID, p, p)
	}
	// The arguments, as Read reads them: what follows in the frame is read as the next
	// message. The key, a slice of the frame, is not kept.
	ft.Discard(n)
	resp, _ := f.h.Get(ctx, args.Req) // it never fails
	if err := p.WriteMessageBegin(ctx, "Get", thrift.REPLY, seqID); err != nil {
		return false, thrift.WrapTException(err)
	}
	result := zaris.ZarisKvGetResult{Success: resp}
	ft.out = zariscodec.AppendCompactZarisKvGetResult(ft.out, &result)
	if err := p.WriteMessageEnd(ctx); err != nil {
		return false, thrift.WrapTException(err)
	}
	if err := p.Flush(ctx); err != nil {
		return false, thrift.WrapTException(err)
	}
	return true, nil
}
