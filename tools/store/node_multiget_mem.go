package store

import (
	"context"
	"encoding/binary"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// memMultiGet serves a MultiGet whose request body is held in memory (a framed binary
// client, thriftbuf.Frames) without an object per item: it reads each key where it lies in
// the request and encodes each outcome as it is read. The reply is byte for byte the one
// the generated code writes for kvHandler.MultiGet (TestMemMultiGet_RepliesAsTheGeneratedCode,
// FuzzMemMultiGet). It takes only the request shape the generated client writes, field after
// field with nothing else; any other request, and every request of another format, goes
// to fn, the generated processor function, unread.
type memMultiGet struct {
	h  *kvHandler
	fn thrift.TProcessorFunction
}

// serveMultiGetInMemory puts memMultiGet in front of p's MultiGet.
func serveMultiGetInMemory(p thrift.TProcessor, h *kvHandler) thrift.TProcessor {
	if fn, ok := p.ProcessorMap()["MultiGet"]; ok {
		p.AddToProcessorMap("MultiGet", &memMultiGet{h: h, fn: fn})
	}
	return p
}

// Thrift's binary type ids of the request's fields, as they appear on the wire.
const (
	wireStop   = byte(thrift.STOP)
	wireString = byte(thrift.STRING)
	wireStruct = byte(thrift.STRUCT)
	wireList   = byte(thrift.LIST)
)

func (f *memMultiGet) Process(ctx context.Context, seqID int32, in, out thrift.TProtocol) (bool, thrift.TException) {
	fr, ok := in.(*thriftbuf.Frames)
	if !ok || out != in {
		return f.fn.Process(ctx, seqID, in, out)
	}
	body := fr.Memory()
	if body == nil {
		return f.fn.Process(ctx, seqID, in, out)
	}
	raw := body.Unread()
	n, first, ok := multiGetItems(raw)
	if !ok || !validBatch(n) {
		return f.fn.Process(ctx, seqID, in, out)
	}
	if err := fr.ReadMessageEnd(ctx); err != nil {
		return false, thrift.WrapTException(err)
	}
	if err := fr.WriteMessageBegin(ctx, "MultiGet", thrift.REPLY, seqID); err != nil {
		return false, thrift.WrapTException(err)
	}
	w := fr.Memory()
	// MultiGet_result{success: MultiGetResponse{status, results, mapEpoch}}.
	w.WriteFieldBegin(ctx, "success", thrift.STRUCT, 0)
	w.WriteFieldBegin(ctx, "status", thrift.I32, 1)
	w.WriteI32(ctx, int32(zaris.KvStatus_Ok))
	w.WriteFieldBegin(ctx, "results", thrift.LIST, 2)
	w.WriteListBegin(ctx, thrift.STRUCT, n)
	epoch := f.h.n.Epoch()
	at := first
	for range n {
		size := int(binary.BigEndian.Uint32(raw[at+3:]))
		key := raw[at+7 : at+7+size]
		at += 7 + size + 1
		r := f.h.n.read(key)
		epoch = max(epoch, r.epoch)
		w.WriteFieldBegin(ctx, "status", thrift.I32, 1)
		w.WriteI32(ctx, int32(r.status))
		if r.value != nil {
			w.WriteFieldBegin(ctx, "value", thrift.STRING, 2)
			w.WriteBinary(ctx, r.value)
		}
		w.WriteFieldBegin(ctx, "version", thrift.I64, 3)
		w.WriteI64(ctx, r.version)
		w.WriteFieldStop(ctx)
	}
	w.WriteFieldBegin(ctx, "mapEpoch", thrift.I64, 3)
	w.WriteI64(ctx, epoch)
	w.WriteFieldStop(ctx) // MultiGetResponse
	w.WriteFieldStop(ctx) // MultiGet_result
	if err := fr.WriteMessageEnd(ctx); err != nil {
		return false, thrift.WrapTException(err)
	}
	if err := fr.Flush(ctx); err != nil {
		return false, thrift.WrapTException(err)
	}
	return true, nil
}

// multiGetItems checks that raw is a MultiGet request's arguments in the shape the
// generated client writes them: {1: MultiGetRequest{1: list<GetItem>}}, each GetItem
// {1: key}, no other field, every size within raw. It returns the number of items and the
// offset of the first.
func multiGetItems(raw []byte) (n, first int, ok bool) {
	// args field 1 (struct), request field 1 (list of structs), the list's size.
	const head = 3 + 3 + 5
	if len(raw) < head || raw[0] != wireStruct || be16(raw[1:]) != 1 ||
		raw[3] != wireList || be16(raw[4:]) != 1 || raw[6] != wireStruct {
		return 0, 0, false
	}
	count := int32(binary.BigEndian.Uint32(raw[7:]))
	if count < 0 {
		return 0, 0, false
	}
	at := head
	for range count {
		// key field (string, id 1), its size, the key, the item's stop.
		if len(raw)-at < 7 || raw[at] != wireString || be16(raw[at+1:]) != 1 {
			return 0, 0, false
		}
		size := int32(binary.BigEndian.Uint32(raw[at+3:]))
		if size < 0 || int64(size) > int64(len(raw)-at-7-1) || raw[at+7+int(size)] != wireStop {
			return 0, 0, false
		}
		at += 7 + int(size) + 1
	}
	// The request's stop and the args' stop.
	if len(raw)-at < 2 || raw[at] != wireStop || raw[at+1] != wireStop {
		return 0, 0, false
	}
	return int(count), head, true
}

func be16(b []byte) uint16 { return binary.BigEndian.Uint16(b) }
