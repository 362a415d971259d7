package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/runtime/clustermap"
)

// noConnError describes a failure to get a connection: nothing was sent.
func (c *Engine) noConnError(ctx context.Context, call *Call, r clustermap.Route, err error) error {
	e := &NodeError{Op: call.Op.Name, Node: r.Node, Addr: r.Addr, Err: err}
	switch {
	case c.closed.Load():
		e.Kind = ErrClosed
	case ctx.Err() != nil:
		e.Err = ctx.Err()
	default:
		e.Kind = ErrNodeUnavailable
	}
	return e
}

// callError describes an attempt that had a connection to the node and got no response;
// call.Current().Sent says whether its request may have left.
func (c *Engine) callError(ctx context.Context, call *Call, r clustermap.Route, o outcome) error {
	err := o.err
	e := &NodeError{Op: call.Op.Name, Node: r.Node, Addr: r.Addr, Err: err}
	var (
		appErr   thrift.TApplicationException
		transErr thrift.TTransportException
		protoErr thrift.TProtocolException
	)
	switch {
	case c.closed.Load():
		e.Kind = ErrClosed
	case !call.Current().Sent && errors.As(err, &protoErr) && protoErr.TypeId() == thrift.SIZE_LIMIT:
		// Refused while it was written, before any byte left: the request is over the
		// message limit, and would be on any node.
		e.Kind = ErrRequestTooLarge
	case o.attemptTimeout:
		e.Kind = ErrAttemptTimeout
		if errors.Is(err, context.DeadlineExceeded) {
			// Not the caller's deadline: keep it out of the chain.
			e.Err = fmt.Errorf("no reply within %s", c.cfg.AttemptTimeout)
		}
	case ctx.Err() != nil:
		e.Err = ctx.Err()
	case o.ownerMoved:
		e.Kind, e.Err = ErrOwnerMoved, errOwnerMoved
	case errors.As(err, &appErr):
		// The node answered with an exception: not a transport failure.
	case errors.As(err, &transErr), errors.As(err, &protoErr):
		e.Kind = ErrTransport
	}
	return e
}

// NodeError is the error of one attempt that reached for a node and got no response. Kind
// is the sentinel that says what kind of failure it was (ErrNodeUnavailable, ErrTransport,
// ErrAttemptTimeout, ErrRequestTooLarge, ErrClosed), or nil for an error the client does
// not judge (the caller's context ended, an application exception); Err is the cause.
// errors.Is and errors.As see both.
type NodeError struct {
	// Op is the operation's name.
	Op string
	// Node is the node's id.
	Node int32
	// Addr is the node's host:port.
	Addr string
	// Kind is the failure's sentinel, or nil.
	Kind error
	// Err is the cause.
	Err error
}

// Error names the operation, the node, the kind and the cause.
func (e *NodeError) Error() string {
	s := fmt.Sprintf("zaris: %s at node %d (%s)", e.Op, e.Node, e.Addr)
	if e.Kind != nil {
		s += ": " + e.Kind.Error()
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the kind and the cause.
func (e *NodeError) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}
