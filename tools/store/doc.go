// Package store is the reference Zaris store: storage nodes, a coordinator, replication and
// every kind of ownership churn, over real sockets, so the zaris-go client can be tested
// against the behaviour it exists to hide. What it promises (its model, trust, answers,
// replication and handoff invariants, known limits) is in README.md, each rule with the
// test that shows it.
//
// # Where to start
//
// Cluster (cluster.go) runs a coordinator and nodes in one process, StartCluster in tests
// and NewCluster elsewhere, with the churn as methods: Kill, Restart, Stall, Failback,
// Join, Leave, MigrateSegment, StopCoordinator, RestartCoordinator. The zarisd command runs
// the same pieces as processes with StartNode and StartElectedCoordinator; AdminClient
// sends it churn commands. NodeConfig and CoordinatorConfig (config.go) hold every knob and
// its default; Credentials and CA (auth.go) make the members' mutual TLS.
//
// # The roles and their files
//
//   - Node (node.go, node_*.go): serves ZarisKv on its data port (node_kv.go, node_multi.go;
//     framed binary calls decoded in memory, node_memcodec.go and node_multiget_mem.go) and
//     the ZarisPeer service on its peer port (node_peer.go); holds its segments
//     (node_segment.go, node_writelock.go); registers under an etcd lease and serves only
//     while it runs (node_register.go, node_lease.go); installs maps and catches up as a
//     learner (node_map.go); waits out a handoff's cut-over (node_cutover.go).
//   - Coordinator (coordinator.go, coordinator_*.go): owns the cluster map and its epochs;
//     admits and watches nodes (coordinator_nodes.go, coordinator_failover.go), places
//     segments (coordinator_placement.go), runs the fenced handoffs
//     (coordinator_reconcile.go) and the churn commands (coordinator_churn.go), commits its
//     state to etcd (coordinator_persist.go), leads through an election
//     (coordinator_elected.go), and serves nodes and admins (coordinator_handler.go,
//     coordinator_admin.go).
//   - Control plane (package control): the cluster state, the coordinators' election and
//     the nodes' leases, in etcd.
//   - Shared by both: the ports and their frame budgets (server.go, frame.go,
//     portlimits.go), pooled peer connections (pool.go), the map as a node reads it
//     (view.go).
//
// Internal traffic uses the ZarisPeer and ZarisCoordinator services of
// tools/idl/zarispeer.thrift (generated into tools/gen/zarispeer) over framed binary;
// clients never see it.
package store
