// Package control keeps the reference store's control plane in etcd: the cluster state,
// the coordinator's election and the nodes' liveness. It is the foundation the coordinator
// and the nodes are moved onto; they do not use it yet.
//
// # Where etcd runs
//
// Open starts an etcd embedded in the process (StartEmbedded: one member on loopback, in a
// temporary directory, optionally without fsync for throwaway data) when no endpoints are
// given, and otherwise connects to an existing cluster (ParseEndpoints reads the
// --etcd-endpoints form, host:port,...); an unreachable etcd fails Open with an error naming
// the endpoints. Three coordinators can each embed one member of a 3-member etcd cluster:
// each gets its own Name and PeerURL and the same Peers (every member's name to its peer
// URL). Tests share one embedded etcd per test process through ForTest, which hands each
// caller its own key prefix; a TestMain calls CloseShared.
//
// # Keys
//
// Every key of a cluster lives under its prefix P (Options.Prefix, default "/zaris/"):
//
//	P/state/epoch          the epoch of the current map, decimal; every commit writes it
//	P/state/map            the encoded cluster map at that epoch
//	P/state/members/<id>   one member (node id, address, the store's word for its state)
//	P/state/segments       the segment assignments: each segment's replicas, primary first
//	P/state/churn          the churn step in progress, absent when none
//	P/leader/<lease>       the election's candidates; the oldest leads
//	P/nodes/<id>           a node's registration, under the node's own lease
//
// # Cluster state
//
// StateStore.Load reads the whole state at one revision. StateStore.Commit writes the next
// state in one transaction: it compares the epoch key's revision with the one loaded (so any
// commit in between, by anyone, fails it with ErrStale) and the leader key's create revision
// with the committer's Fence (so a deposed leader's write fails with ErrNotLeader), then
// writes only what changed. The epoch never goes back: a commit may not lower it, and a new
// map needs a higher epoch (ErrEpochBackwards).
//
// # Election
//
// An Elector campaigns through concurrency.Election under P/leader/ with a session lease.
// Campaign returns the Fence of the leadership; Lost is closed when the session ends. When
// a leader's process dies, its lease expires after the TTL and a standby's Campaign returns;
// Close or Resign hands over at once.
//
// # Node liveness
//
// A node registers (Register) by putting P/nodes/<id> under a lease it renews every third
// of the TTL. Each renewal's send instant, read on the node's own monotonic clock, and the
// TTL its reply grants extend the node's Liveness: the node may serve until send+TTL-margin.
// etcd measures the lease from the renewal's arrival, which comes after the send, so the
// node stops serving no later than etcd expires its key, with no clock shared between hosts
// and no wall-clock instant involved. A lost lease (ErrLeaseLost) ends the right at once.
//
// # How the store will use it
//
//   - Every zarisd coordinator opens the Backend, creates an Elector and campaigns; the
//     standbys block in Campaign. On winning, the leader loads the State and continues:
//     it publishes Map at Epoch to the nodes and, if Churn is set, resumes that step from
//     Churn.Step.
//   - Every change the coordinator makes today in memory (a registration, a failover, a
//     join, a failback, a leave, a migration step) becomes: build the next State from the
//     last committed one (Epoch+1 with the new map; or the same epoch with only Churn's step
//     advanced), Commit it with the leadership's Fence, and only after the commit succeeds
//     tell the nodes. ErrStale means another leader got in: load again. ErrNotLeader means
//     the leadership is gone: stop acting and campaign again.
//   - Each node opens a client to the same etcd, registers under P/nodes/<id> with its data
//     address, and serves only while its Liveness says so; when it loses its lease it stops
//     serving and registers again. The coordinator watches P/nodes/: a key deleted by a lease
//     expiry is a node failure (alongside the existing refused-probe fast path), a key put
//     is a node registering.
//   - The nodes read the cluster map from the coordinator as today; P/state/map lets a node
//     or a new coordinator read the current map straight from etcd.
package control
