// Package store is the reference Zaris store: storage nodes, a coordinator, replication, and
// every kind of ownership churn, all over real sockets, so the zaris-go client can be tested
// against the behaviour it exists to hide.
//
// # Model
//
// The key space is cut into segments (runtime.Segment: CRC-32 of the key modulo the segment
// count, the same function the client routes with). Each segment has an active owner that
// serves its reads and writes, replicas that hold an in-sync copy, and, while a copy is being
// filled, learners. Each segment also has a preferred primary, the node that owns it when the
// cluster is whole.
//
// The Coordinator owns the cluster map and numbers every version of it with an epoch. Its
// state (the map and its epoch, the members, the wanted placement, the churn in progress) is
// kept in etcd (package control): every change is committed in one transaction, fenced by
// the coordinator's leadership and compared with the state it loaded, before any node is
// told, and a failed commit stops the coordinator. A coordinator started on an etcd that holds
// a cluster continues it: same cluster id, a new map at the next epoch, a handoff left half
// done resumed from the step it reached. zarisd runs any number of coordinators; one leads
// through an etcd election (ElectedCoordinator), the others stand by, and a standby leads
// about the session TTL (DefaultSessionTTL, 1 s) after the leader dies. NewCluster and a lone
// zarisd coordinator embed a single-member etcd when given none.
//
// Nodes register with the coordinator; it heartbeats each node (DefaultHeartbeat, 50 ms) and
// pushes every new map to every node. A node whose connection drops and whose data port then
// refuses a probe (a killed process) is failed over at once, typically within one heartbeat,
// well inside the client's retry window: each segment it owned goes to a replica (or to a
// learner that reported a full copy), and the new map goes out at once. A node that stops
// answering while its port still accepts, or whose port the coordinator cannot reach (a
// partition: a dial that times out, where the node may still serve its clients), is suspected
// after DefaultFailureTimeout (250 ms) and pinged on a fresh connection; only if that probe
// goes unanswered for DefaultProbeTimeout (1 s) does the coordinator give up on it. So a live
// node that is merely slow (a loaded machine, a long GC pause) keeps its segments. This is the
// lease-plus-probe scheme of many stores: a short timeout only raises suspicion, and the
// verdict takes a direct question that a dead process cannot answer.
//
// A node's right to serve comes from etcd, not from the coordinator. Each node registers under
// a lease (NodeConfig.LeaseTTL, DefaultLeaseTTL 2 s) that it renews every third of the TTL, and
// serves the segments it owns only until the TTL, less a tenth, after it sent its last
// successful renewal, measured on its own monotonic clock (control.Liveness). etcd starts the
// TTL when the renewal arrives, after the send, so the node always stops before etcd expires
// its key, and no two hosts need to agree on the time (node wall clocks skewed by ±10 s change
// nothing: TestLinearizable_NodeClocksSkewedTenSeconds). The coordinator watches the nodes'
// keys: a key that goes is a failed node. A node the coordinator gave up on while it may be
// alive (cut off, stalled) is failed over only once its lease is revoked and the TTL has run
// out, so it never answers a read from a copy the new owner has already moved past; the node
// learns of the loss at its next renewal, stops serving, registers again and catches up like a
// restarted node (a segment whose only copy it held has no owner until it is back, and gets it
// back intact). A process registering as a node that is registered from another address
// (restarted elsewhere while its first process may still run) is admitted only once the first
// is failed over that way: the new key in etcd replaced the first process's key, not its lease,
// which the cluster state records so that a coordinator taking over fences it too
// (TestRegister_NewProcessOfALiveNodeFencesTheOldOne). The revoke's intent is committed, fenced
// by the leadership, before the revoke is sent: a leader deposed between the two may still
// revoke the lease, and the next leader, which reads the intent, waits the lease's TTL out
// before it takes the key's deletion (or its absence at takeover) for a failure
// (TestCoordinator_RevokeOfADeposedLeaderIsWaitedOut). A request that finds the right run out
// waits up to NodeConfig.LeaseWait (DefaultLeaseWait, 250 ms) for the next renewal before it
// answers Unavailable: a stall of the whole process (a loaded machine) runs the right out
// without any failure, and the renewal goes out as soon as the stall ends. A segment whose
// every copy died with its process starts empty once a wanted node is back: with one node
// failure at a time and the default replication factor of 2 that never happens.
//
// With no coordinator running, nodes keep serving their last map on their etcd leases, but
// nothing is failed over, no learner is promoted and no churn completes until one leads again
// (TestProcess_AllCoordinatorsDownNodesKeepServing). With etcd itself down, each node keeps
// serving until its right runs out (about 1.9 s measured with the default TTL), then answers
// Unavailable; the coordinator stops at its next commit. When etcd is back, the nodes'
// renewals succeed or they register again, and once a coordinator leads again (zarisd's
// campaign again on their own) writes succeed, every acknowledged write intact (about 4 s
// after etcd's return measured: TestEtcdDown_NodesServeWhileTheirLeasesAllowAndRecover).
//
// # Trust
//
// A cluster trusts its members only: the processes holding a certificate of its CA
// (Credentials). Every peer call (Replicate, Fetch, PushMap, Ping), every coordinator call
// (Register, Synced, GetMap) and every admin call (AdminClient, zarisd ctl: migrate, leave,
// failback) is mutual TLS with that CA, and the etcd a Cluster or zarisd embeds takes the
// same certificates. An outsider can reach the data port and do what any client does; it
// cannot write to a replica, push a map, register as a node, move a segment or read the
// cluster's internal state: its connection fails at the handshake and nothing changes
// (TestAuth_OutsidersAreRefusedAndChangeNothing, on processes
// TestProcess_OutsidersAreRefusedByMembersWithCredentials). NewCluster makes a throwaway CA
// in memory, so an in-process cluster is authenticated with no setup; a zarisd without
// credentials is in protected mode (its cluster ports on loopback only, see
// tools/zarisd). Where a node can tell, it refuses what a member gone wrong could send: a
// map far (over 64 epochs) beyond its own and beyond the epoch the coordinator committed
// to etcd, a write of a node that does not own the segment in its map
// (TestAuth_NodeRefusesWhatItsViewRulesOut). Peer and coordinator ports judge a frame by
// its length before they buffer it (8 MiB per request frame on the peer port, 1 MiB on the
// coordinator's) and hold at most 128 MiB of frames at once, a frame over it closing its
// connection (TestInternalPorts_HalfFrameFloodIsBounded).
//
// # Known limits
//
// What the tests show the store does not do:
//
//   - The data port serves any client unless the node's own TLS (NodeConfig.TLS) is on; an
//     etcd a Cluster is given (ClusterConfig.Etcd, EtcdEndpoints) keeps its own protection.
//     A member's certificate is the whole of its identity: any member may act as any node, and a flood of frames
//     by members (or, in protected mode, local processes) can take a port's frame budget,
//     whose other frames then close their connections until it ends.
//   - A cut-over whose old owner hangs waits until that owner is failed over (its lease
//     revoked and its TTL run out, or expired); the segment answers Unavailable or Migrating
//     meanwhile (TestCutover_HungOldOwner_NewOwnerWritesOnlyAfterItsLeaseRanOut).
//   - A tombstone on a replica is collected only when the owner next writes to the segment,
//     so a segment that is deleted from and then left alone keeps its tombstones on its
//     replicas (TestTombstone_ReplicatedThenCollectedWhenEveryCopyMovedPast holds one until
//     the next write).
//   - Data lives in memory: a restarted node process comes back empty and catches up, and a
//     segment whose every copy died starts empty (TestRestart_SoleCopyLostStartsAfresh).
//
// # Answers
//
// A Node answers every request from its own current map and puts that map's epoch in the
// answer's mapEpoch, so a client learns of a newer map from any answer. The status, in this
// order: no owner in the map → Unavailable; a write to a segment in cut-over → Migrating; a
// read at the owner of a segment in cut-over (its right to serve is revoked) → Unavailable;
// this node owns the segment → the operation is served (Ok, NotFound, Conflict),
// or Unavailable if the node's right to serve (its etcd lease) ran out and no renewal
// extended it within LeaseWait;
// a write at a replica → ReplicaWriteRejected; the segment's ownership is being handed over
// (failback) → OwnershipChanging; otherwise Moved. An empty key, a key over MaxKeySize or a
// value over MaxValueSize answer InvalidRequest. A frame over the size limit, bytes that are
// not Thrift, or a connection silent past IdleTimeout close that one connection; a panicking
// handler closes the connection that carried its request. Nothing a client sends stops a node.
// A request that finds its segment in cut-over first waits up to CutoverWait (100 ms) for the
// map that ends it and is answered from that map, so a handoff usually costs a call a few
// milliseconds rather than a retry after backoff.
//
// Every key has a version, drawn from a per-segment counter that never goes back, so it grows
// on every write, deletes included: a key deleted and written again gets a higher version. A
// delete leaves a tombstone carrying its version; a read of it answers NotFound, a Delete of
// it NotFound. It does not go back when every node restarts empty either: a node issues no
// version below its term's floor, the etcd revision of its latest registration shifted left
// 32 bits, above every version issued before that registration, at no etcd write beyond the
// registration (TestVersions_NeverGoBackAfterTheWholeClusterRestarts). So a guarded write
// prepared before any restart answers Conflict after it.
// Put's ifMatchVersion and ifAbsent and Delete's ifMatchVersion answer Conflict with the
// current version when they fail. Increment reads the value as a decimal int64 (missing = 0).
//
// MultiGet, MultiPut and MultiDelete answer each item exactly as Get, Put and Delete would,
// with the same status order and replication, one item after another in request order, and
// carry one result per item. A batch is not atomic: each item stands or fails on its own, and
// items the node does not own get their own wrong-node status. A batch with no items or more
// than runtime.MaxBatchItems answers InvalidRequest with no results. A call that comes in a
// binary frame (every call of a framed binary client, a multi-key call of a THeader one) is
// decoded from memory and its reply encoded into memory with internal/thriftbuf, not a field
// at a time through the connection's protocol layers; the reply's bytes are the generated
// code's (TestInMemory_RepliesAsTheGeneratedCode). A framed binary client's MultiGet goes
// further: its keys are read where they lie in the request and each outcome is encoded as
// it is read, with no object per item (memMultiGet; TestMemMultiGet_RepliesAsTheGeneratedCode,
// FuzzMemMultiGet). A call whose arguments lack the request answers InvalidRequest.
//
// # Replication and churn
//
// The owner sends each write to every replica and every learner that already fetched its copy,
// and acknowledges the write only after all of them applied it; a replica it cannot reach holds
// the write until the coordinator's next map drops that replica. A write that may have
// reached a copy is seen through even when its caller stops waiting (ReplicationTimeout, in
// doubt): the owner resends it until every copy applied it, and applies it itself, before
// its next write to the segment or its confirmation of a cut-over, so the copies never
// disagree on it (TestHandoff_WriteInFlightAtCutoverLeavesTheCopiesAlike). A replica
// applies writes only from the owner its own map names. So after a single node failure every acknowledged write is
// on the new owner, whichever order the nodes learn the new map in. With more than two
// copies, a write the old owner had in flight when it died may have reached some replicas
// and not the new owner: those keep it, and a later handoff to one of them answers it.
//
// Replication cannot reorder. Tombstones replicate and are copied to learners like writes, and
// a copy applies an entry only if its version is newer than what the key holds, tombstones
// included, and above the segment's stable version: the version of the owner's latest write
// every copy applied, which the owner sends with each Replicate (a learner's copy is stable up
// to the counter it was taken at). So a Replicate that arrives late, twice, or after its
// resend on a new connection is a no-op and never lands over a newer write or a delete.
// Tombstones are collected at the stable version, that is only once every copy of the
// segment applied the delete or a later write.
//
// A node that joins or returns gets its segments as a learner: it fetches a copy from the
// owner (taken between two writes) while receiving every later write, reports to the
// coordinator, and becomes a replica. Only then can ownership move to it:
//
//   - join (scale-out) and MigrateSegment: the owner keeps serving while the copy is made, then
//     a short cut-over answers writes with Migrating, then the new owner serves and the old one
//     answers Moved;
//   - failback: the returning preferred primary takes ownership with the segment marked
//     transitioning, and until every node has that map non-owners answer OwnershipChanging;
//   - leave: the leaving node's copies move to other nodes, ownership first, then it leaves
//     the map; a node process that left is refused if it registers again.
//
// Every handoff is fenced, and this is the invariant: the old owner stops serving a segment,
// reads included, before any map names a new owner, so no node acknowledges a write to the
// segment while another still answers reads from an older copy, however slow the old owner is.
// The coordinator does it in three steps: revoke (a map puts the segment in cut-over: the
// owner answers writes Migrating and reads Unavailable), confirm (the old owner installed that
// map and finished the write it had in flight on the segment, or it was failed over: its etcd
// lease is gone, so it no longer serves), publish (the map naming the new owner; a failback
// marks it transitioning until every node has it). Each handoff runs on its own, so one
// whose confirm waits (its old owner sees a write through to a copy it cannot reach) holds
// back no segment another node owns; an old owner hands off one segment at a time, since it
// confirms its map as a whole.
// Failover of a live node is fenced the same way by its lease.
//
// # Running one
//
// Cluster runs a coordinator and nodes in one process (StartCluster in tests, NewCluster
// elsewhere) and offers the churn as methods: Kill, Restart, Failback, Join, Leave,
// MigrateSegment, StopCoordinator, RestartCoordinator. The zarisd command runs the same
// coordinators and nodes as separate processes.
//
// Internal traffic (heartbeats, map pushes, replication, copies) uses the ZarisPeer and
// ZarisCoordinator services of tools/idl/zarispeer.thrift (tools/gen/zarispeer) over framed binary; clients never see it.
package store
