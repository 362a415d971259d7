package runtime

import (
	"context"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/runtime/clustermap"
)

// Service describes a generated service to the engine, which knows no IDL (as a Kitex
// ServiceInfo does): how to bind the service's generated client to a connection's
// thrift.TClient, and how to fetch the cluster map. zarisgen generates one per IDL
// (zarisclient.Service); its Dial hands it to runtime.Dial with WithService.
type Service struct {
	// Name is the IDL service name.
	Name string
	// NewClient binds the generated client to c, once per connection; every operation's
	// Op.Invoke gets what it returned.
	NewClient func(c thrift.TClient) any
	// FetchMap invokes the IDL's map operation over client, a value NewClient returned (or
	// a custom Dialer's Conn.Client).
	FetchMap func(ctx context.Context, client any) (*clustermap.Map, error)
}
