// The Zaris store's internal protocol: node <-> node and node <-> coordinator traffic of the
// reference store in tools/store (heartbeats, map pushes, write replication, segment copy, and
// the coordinator's churn commands). Clients never speak it; they speak ZarisKv (zaris.thrift).
//
// Generated into tools/gen/zarispeer by `make generate` (never edit it by hand); it lives in the
// tools module, so the client's build never holds it.

namespace go zarispeer

/** The outcome of a peer call. */
enum PeerStatus {
  /** Applied or served. */
  Ok = 0,
  /** The receiver's map is older than the sender's: the sender pushes its map and retries. */
  StaleReceiver = 1,
  /** The receiver's map says the sender may not do this (not the owner, not a member). */
  Rejected = 2,
}

/** One node of the cluster as the store sees it: the data address plus the peer address. */
struct PeerNode {
  1: required i32 id,
  2: required string host,
  3: required i32 port,
  /** host:port of the node's ZarisPeer service. */
  4: required string peerAddr,
}

/** One segment's membership, including what the public ClusterMap does not show. */
struct PeerSegment {
  1: required i32 id,
  /** The active owner; unset when the segment has no live owner. */
  2: optional i32 owner,
  /** In-sync copies: every acknowledged write has reached them. */
  3: required list<i32> replicas,
  /** Copies being filled (catch-up or migration); they receive writes once they fetched. */
  4: required list<i32> learners,
  /** Ownership is being handed back (failback). */
  5: required bool transitioning,
  /** The segment is being copied to a new owner (scale-out or migration). */
  6: required bool migrating,
  /**
   * Handoff fence (migration, join, leave, failback): the owner's right to serve the segment
   * is revoked; it answers writes Migrating and reads Unavailable until a map names the new
   * owner.
   */
  7: required bool cutover,
}

/** The coordinator's map, of which zaris.ClusterMap is the public view. */
struct PeerMap {
  1: required i64 epoch,
  2: required i32 segmentCount,
  3: required list<PeerNode> nodes,
  4: required list<PeerSegment> segments,
  /**
   * Chosen by the coordinator when it starts. A node accepts peer traffic only from its own
   * cluster, so a port reused by another cluster on the same host cannot mix the two.
   */
  5: required string clusterId,
}

/**
 * The first outcome of a tokened write (zaris.RequestToken): what a replay of the same token
 * is answered with. It travels with the write it records (Entry.outcome) and with the
 * segment's copy (FetchResponse.outcomes).
 */
struct Outcome {
  1: required i64 client,
  2: required i64 sequence,
  /** The key's version after the write. */
  3: required i64 version,
  /** The operation's result value (Increment: the sum). */
  4: required i64 value,
}

/**
 * One key's state. A deleted entry (a tombstone) carries the version of the delete and no
 * value; it replicates and is copied like a write.
 */
struct Entry {
  1: required binary key,
  2: optional binary value,
  3: required i64 version,
  4: required bool deleted,
  /** Set when the write carried a request token: its outcome, kept with it. */
  5: optional Outcome outcome,
}

struct ReplicateRequest {
  /** The sending owner. */
  1: required i32 sender,
  /** The epoch of the sender's map. */
  2: required i64 epoch,
  3: required i32 segment,
  4: required Entry entry,
  /** The sender's cluster (PeerMap.clusterId). */
  5: required string clusterId,
  /**
   * The version of the owner's latest write of the segment that every copy applied (0 for
   * none): a copy may collect its tombstones up to it, and refuses any entry at or below it.
   */
  6: optional i64 stable,
}

struct ReplicateResponse {
  1: required PeerStatus status,
  /** The receiver's map epoch. */
  2: required i64 epoch,
}

struct FetchRequest {
  /** The learner asking for a copy. */
  1: required i32 learner,
  /** The epoch of the learner's map. */
  2: required i64 epoch,
  3: required i32 segment,
  /** The learner's cluster (PeerMap.clusterId). */
  4: required string clusterId,
}

struct FetchResponse {
  1: required PeerStatus status,
  /** The owner's map epoch. */
  2: required i64 epoch,
  /**
   * The segment's version counter when the copy was taken: the copy holds every entry up to
   * it, so the learner refuses any forwarded entry at or below it.
   */
  3: required i64 counter,
  4: required list<Entry> entries,
  /** The outcomes of tokened writes the segment keeps (rule B8), oldest first. */
  5: optional list<Outcome> outcomes,
}

struct PingResponse {
  1: required i32 nodeId,
  /** Changes every time the node process (or in-process node) starts. */
  2: required i64 incarnation,
  3: required i64 epoch,
}

/** Served by every node on its peer port. */
service ZarisPeer {
  /**
   * The coordinator's heartbeat; coordinatorEpoch lets the node know whether it is behind.
   * leaseUntil (unix nanoseconds, 0 for none) extends the node's lease: it serves the segments
   * it owns only until then, and the coordinator hands them to another node only after it. A
   * node takes the lease only if it holds the map of coordinatorEpoch or a newer one.
   */
  PingResponse Ping(1: i64 coordinatorEpoch, 2: string clusterId, 3: i64 leaseUntil)
  /**
   * Installs the map if it is newer than the node's; returns the node's epoch afterwards.
   * leaseUntil as in Ping, taken only if the node then holds newMap or a newer map.
   */
  i64 PushMap(1: PeerMap newMap, 2: i64 leaseUntil)
  /** Returns the node's current map. */
  PeerMap GetPeerMap()
  /** Applies one write of the segment's owner at a replica or learner. */
  ReplicateResponse Replicate(1: ReplicateRequest req)
  /** Returns a copy of a segment to a learner and starts forwarding writes to it. */
  FetchResponse Fetch(1: FetchRequest req)
}

struct RegisterRequest {
  1: required i32 nodeId,
  2: required i64 incarnation,
  /** The data address clients use. */
  3: required string host,
  4: required i32 port,
  /** host:port of the node's ZarisPeer service. */
  5: required string peerAddr,
}

struct SyncedRequest {
  1: required i32 nodeId,
  2: required i64 incarnation,
  3: required i32 segment,
  /** The owner the copy was fetched from. */
  4: required i32 owner,
  /** The owner's map epoch when it handed out the copy (FetchResponse.epoch). */
  5: required i64 fetchEpoch,
}

struct SyncedResponse {
  /**
   * The copy predates the learner's latest addition to the segment (the owner may have
   * stopped forwarding writes in between): fetch a new one.
   */
  1: required bool refetch,
}

/** Register's answer to a node process that left the cluster (Leave): it must not rejoin. */
exception LeftCluster {
  1: required string message,
}

/** Served by the coordinator. */
service ZarisCoordinator {
  /** A node (re)starting announces itself; returns the current map. */
  PeerMap Register(1: RegisterRequest req) throws (1: LeftCluster left)
  /** A learner reports that it holds a full copy of a segment. */
  SyncedResponse Synced(1: SyncedRequest req)
  /** Returns the coordinator's current map. */
  PeerMap GetMap()
  /** Hands a node its preferred segments back; returns when done. */
  PeerMap Failback(1: i32 nodeId)
  /** Drains a node; returns when it holds no segment. */
  PeerMap Leave(1: i32 nodeId)
  /** Moves one segment's ownership to a node; returns when done. */
  PeerMap MigrateSegment(1: i32 segment, 2: i32 toNode)
}
