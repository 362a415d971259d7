// Package control keeps the reference store's control plane in etcd: the cluster state,
// the coordinator's election and the nodes' liveness. The store's coordinator and nodes use
// it as "How the store uses it" describes.
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
// # How the store uses it
//
//   - Every zarisd coordinator opens the Backend, creates an Elector and campaigns; the
//     standbys block in Campaign. On winning, the leader loads the State and continues: it
//     publishes the loaded map at the next epoch to the nodes and resumes the churn its
//     Churn records (the store keeps its own detail of the step in Churn.Data).
//   - Every change the coordinator makes (a registration, a failover, a join, a failback, a
//     leave, a migration step) builds the next State from the last committed one (a new map
//     at a higher epoch, or the same epoch with only the churn changed), Commits it with the
//     leadership's Fence, and only after the commit succeeded tells the nodes. Any failed
//     commit (ErrStale, ErrNotLeader, etcd unreachable) stops that coordinator; zarisd then
//     campaigns again.
//   - Each node opens a client to the same etcd, registers under P/nodes/<id> (its value: the
//     node's process incarnation and TTL), and serves only while its Liveness says so; when
//     it loses its lease it stops serving and registers again. The coordinator admits a node
//     only with a registration of the same process, and watches P/nodes/: a key deleted under
//     a live node's lease is a node failure (alongside the refused-probe fast path).
//   - The nodes get the cluster map from the coordinator; P/state/map is where a new
//     coordinator reads it.
package control
