package clustermap

// NoNode is the node id of a call's attempt that never chose a node (for example, the
// segment had no owner in the map). It is negative, and no node of a map the client routes
// by is: the engine refuses a map with a negative node id.
const NoNode int32 = -1

// Route is where one key goes under one map.
type Route struct {
	// Segment is the key's segment (see SegmentOf).
	Segment int32
	// Node is the segment's active owner.
	Node int32
	// Addr is the owner's host:port.
	Addr string
	// Epoch is the map's epoch.
	Epoch int64
}
