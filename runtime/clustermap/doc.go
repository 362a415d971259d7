// Package clustermap is the cluster map a Zaris client routes by: which node owns which
// segment of the key space (Map), how a key finds its segment (SegmentOf) and its owner
// (Route), and what a request to refresh the map carries and leads to (Evidence,
// RefreshResult, RefreshStats).
//
// The store places data by SegmentOf too, so the client and the store always agree on a
// key's segment. The runtime package's Engine keeps the current map and its Refresher
// refreshes it; this package holds only the values they pass around, so the store, the
// tools and middleware can use them without the engine.
package clustermap
