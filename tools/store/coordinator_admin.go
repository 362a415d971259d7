package store

import (
	"context"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

// AdminClient drives a coordinator over the wire (what `zarisd ctl` uses): it reads the map
// and runs churn commands, each of which returns when the churn is complete. It is safe for
// concurrent use.
type AdminClient struct {
	coords *coordinators
	pool   *connPool
}

// DialCoordinator returns an AdminClient for the coordinator at addr, or for whichever of a
// comma-separated list of coordinators leads, that presents creds (nil for a cluster without
// credentials). Connections are made per call and pooled.
func DialCoordinator(addr string, creds *Credentials) *AdminClient {
	return &AdminClient{coords: newCoordinators(addr), pool: newConnPool(2*time.Second, creds.clientTLS())}
}

// Close closes the client's connections.
func (a *AdminClient) Close() error {
	a.pool.close()
	return nil
}

func (a *AdminClient) call(ctx context.Context, fn func(*zarispeer.ZarisCoordinatorClient) (*zarispeer.PeerMap, error)) (*zarispeer.PeerMap, error) {
	timeout := adminTimeout + 5*time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	var pm *zarispeer.PeerMap
	err := a.coords.call(a.pool, timeout, func(c thrift.TClient) error {
		var err error
		pm, err = fn(zarispeer.NewZarisCoordinatorClient(c))
		return err
	})
	return pm, err
}

// PeerMap returns the coordinator's full map, learners and cut-overs included.
func (a *AdminClient) PeerMap(ctx context.Context) (*zarispeer.PeerMap, error) {
	return a.call(ctx, func(c *zarispeer.ZarisCoordinatorClient) (*zarispeer.PeerMap, error) { return c.GetMap(ctx) })
}

// Map returns the coordinator's current cluster map as clients see it.
func (a *AdminClient) Map(ctx context.Context) (*zaris.ClusterMap, error) {
	pm, err := a.PeerMap(ctx)
	if err != nil {
		return nil, err
	}
	return publicMap(pm), nil
}

// Failback runs Coordinator.Failback on the remote coordinator and returns the map after it.
func (a *AdminClient) Failback(ctx context.Context, node int32) (*zaris.ClusterMap, error) {
	return a.public(a.call(ctx, func(c *zarispeer.ZarisCoordinatorClient) (*zarispeer.PeerMap, error) {
		return c.Failback(ctx, node)
	}))
}

// Leave runs Coordinator.Leave on the remote coordinator and returns the map after it; stop
// the node's process afterwards.
func (a *AdminClient) Leave(ctx context.Context, node int32) (*zaris.ClusterMap, error) {
	return a.public(a.call(ctx, func(c *zarispeer.ZarisCoordinatorClient) (*zarispeer.PeerMap, error) {
		return c.Leave(ctx, node)
	}))
}

// MigrateSegment runs Coordinator.MigrateSegment on the remote coordinator and returns the map
// after it.
func (a *AdminClient) MigrateSegment(ctx context.Context, seg, to int32) (*zaris.ClusterMap, error) {
	return a.public(a.call(ctx, func(c *zarispeer.ZarisCoordinatorClient) (*zarispeer.PeerMap, error) {
		return c.MigrateSegment(ctx, seg, to)
	}))
}

func (a *AdminClient) public(pm *zarispeer.PeerMap, err error) (*zaris.ClusterMap, error) {
	if err != nil {
		return nil, err
	}
	return publicMap(pm), nil
}
