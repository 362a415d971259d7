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
// thriftbuf.Frames) with the generated codec (gen/zariscodec): the request is decoded from
// the body where it lies, the key a slice of it for the lookup only, and the reply is
// encoded in one append, byte for byte the generated processor's reply
// (TestCodecGet_RepliesAsTheGeneratedCode). Without the generated processor's connectivity
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
	fr, ok := in.(*thriftbuf.Frames)
	if !ok || out != in {
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
