package store

import (
	"errors"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
)

// served ends the connection on a transport error, goes on after an unknown method (the
// processor answered it), and otherwise does as the processor said; a request served
// without an error costs no allocation.
func TestServed(t *testing.T) {
	transport := thrift.NewTTransportException(thrift.END_OF_FILE, "gone")
	unknown := thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "Nope")
	other := thrift.NewTApplicationException(thrift.INTERNAL_ERROR, "boom")
	for _, tc := range []struct {
		ok       bool
		err      error
		next     bool
		endsWith error
	}{
		{true, nil, true, nil},
		{false, nil, false, nil},
		{true, transport, false, transport},
		{false, unknown, true, nil},
		{false, other, false, other},
	} {
		next, end := served(tc.ok, tc.err)
		assert.Equal(t, tc.next, next, "%v %v", tc.ok, tc.err)
		assert.True(t, errors.Is(end, tc.endsWith) && (end == nil) == (tc.endsWith == nil), "%v %v: %v", tc.ok, tc.err, end)
	}
	allocs := testing.AllocsPerRun(100, func() { served(true, nil) })
	assert.Zero(t, allocs, "allocations to judge a request served without an error")
}
