// The Zaris key-value contract: the wire types of the ZarisKv service and the cluster map.
//
// This file is the single source of the generated code under gen/. After editing it run
// `make generate`; never edit gen/ by hand.
//
// Status annotations, on the status enum (KvStatus, the type of field 1 of every response);
// Thrift keeps annotations on an enum but drops them on its values, so each class lists its
// values, and every value is in exactly one of the first three (tools/zarisgen/README.md):
//   zaris.answer       = "<value>,..."   answers: returned to the application at once (R8)
//   zaris.retry        = "<value>,..."   churn retried after backoff, no map refresh (R1)
//   zaris.refresh      = "<value>,..."   churn retried after one shared map refresh (R1, R2)
//   zaris.slow_backoff = "<value>:<n>,..." retried values whose backoff is n times longer (R5)
//   zaris.ok           = "<value>"       the answer of a multi-key response judged per item
//   zaris.invalid      = "<value>"       the answer for an item the client refuses unsent
//   zaris.unanswered   = "<value>"       the status of an item no node answered
// A new status is a new value here, named in one class, then `make generate`.
//
// Operation annotations (read by tools/zarisgen; every data operation needs all three):
//   zaris.kind       = "read" | "write" | "admin"   admin operations are not routed by key and
//                                                   get no typed method (the runtime uses them)
//   zaris.idempotent = "true" | "false"             whether replaying a request that may have
//                                                   been applied is harmless
//   zaris.routing    = "<request field>"            the field whose bytes pick the segment
//   zaris.guards     = "<field>,<field>"            optional: request fields whose presence makes a
//                                                   replay of a non-idempotent write come back
//                                                   Conflict instead of applying twice (rule R9)
//   zaris.dedup      = "<field>"                    optional, on a single-key non-idempotent
//                                                   write: its optional RequestToken field. The
//                                                   client sets it once per call, the same on
//                                                   every attempt; a store whose map advertises
//                                                   dedupWindowMs answers a replay of it with the
//                                                   first outcome, so the client may replay it
//                                                   (rule B8). The response must carry version.
//
// Every data operation takes one request struct and returns a response struct whose field 1 is
// `status: KvStatus` and which carries `mapEpoch: i64`, the answering node's cluster-map epoch.
//
// A multi-key operation names a list of item structs in its routing annotation and the list
// of per-item results in its response:
//   zaris.routing    = "<list>[].<item field>"      the request's list of items and, in each
//                                                   item, the field whose bytes pick the segment
//   zaris.results    = "<list>"                     the response's list of per-item results, one
//                                                   per item in request order; each result
//                                                   struct's field 1 is `status: KvStatus`
//   zaris.guards     = "<list>[].<field>,..."       optional: item fields that make a replay of
//                                                   that item come back Conflict (rule R9)
// The generated method splits the items by owner, sends one sub-request per owner, and retries
// only the items whose status is churn. The response's own status is Ok when the node judged
// the items one by one, InvalidRequest when the batch itself is malformed (no items, or more
// than runtime.MaxBatchItems); a batch is not atomic across items.
//
// Service annotation (required):
//   zaris.map_operation = "<operation>"             the admin operation, taking no argument, that
//                                                   returns the answering node's ClusterMap

namespace go zaris

/**
 * The outcome of a data operation. Ok, NotFound, Conflict and InvalidRequest are answers the
 * client returns to the application at once; the other statuses are ownership churn the client
 * absorbs by retrying (rules R1, R2, R8).
 */
enum KvStatus {
  /** The operation was applied (or the read served). Returned to the caller. */
  Ok = 0,
  /** The key does not exist. An answer: returned at once, never retried (R8). */
  NotFound = 1,
  /**
   * A precondition failed (ifMatchVersion differs or ifAbsent found the key); the response
   * carries the key's current version. An answer: returned at once, never retried (R8, R9).
   */
  Conflict = 2,
  /**
   * This node does not own the key's segment and no handoff is in flight. The client refreshes
   * its cluster map and retries (R1, R2).
   */
  Moved = 3,
  /**
   * This node does not own the segment and its ownership is being handed over (failback). The
   * client refreshes its map and retries (R1, R2).
   */
  OwnershipChanging = 4,
  /**
   * A write reached a replica instead of the active owner. The client refreshes its map and
   * retries (R1, R2).
   */
  ReplicaWriteRejected = 5,
  /**
   * A write reached a segment in its migration cut-over. The client retries after a longer
   * backoff (x8) without refreshing (R1, R2, R5).
   */
  Migrating = 6,
  /**
   * The segment has no reachable owner right now. The client retries after backoff without
   * refreshing (R1, R2).
   */
  Unavailable = 7,
  /**
   * The request is malformed (empty or oversized key or value). An answer: returned at once,
   * never retried.
   */
  InvalidRequest = 8,
} (
  zaris.answer       = "Ok,NotFound,Conflict,InvalidRequest",
  zaris.retry        = "Unavailable,Migrating",
  zaris.refresh      = "Moved,OwnershipChanging,ReplicaWriteRejected",
  zaris.slow_backoff = "Migrating:8",
  zaris.ok           = "Ok",
  zaris.invalid      = "InvalidRequest",
  zaris.unanswered   = "Unavailable",
)

/** Reads the value and version of a key. */
struct GetRequest {
  1: required binary key,
}

struct GetResponse {
  1: required KvStatus status,
  /** The value, set when status is Ok. */
  2: optional binary value,
  /** The key's version when status is Ok; 0 otherwise. */
  3: required i64 version,
  /** The answering node's cluster-map epoch (rule B1). */
  4: required i64 mapEpoch,
}

/** Writes a value. Without a guard the write always applies; with one it may answer Conflict. */
struct PutRequest {
  1: required binary key,
  2: required binary value,
  /** Apply only if the key's current version equals this one; otherwise Conflict. */
  3: optional i64 ifMatchVersion,
  /** When true, apply only if the key does not exist; otherwise Conflict. */
  4: optional bool ifAbsent,
}

struct PutResponse {
  1: required KvStatus status,
  /** The key's version after the write (Ok) or its current version (Conflict). */
  2: required i64 version,
  /** The answering node's cluster-map epoch (rule B1). */
  3: required i64 mapEpoch,
}

/** Deletes a key. Deleting a missing key answers NotFound. */
struct DeleteRequest {
  1: required binary key,
  /** Delete only if the key's current version equals this one; otherwise Conflict. */
  2: optional i64 ifMatchVersion,
}

struct DeleteResponse {
  1: required KvStatus status,
  /** The version the key had when it was deleted (Ok) or its current version (Conflict). */
  2: required i64 version,
  /** The answering node's cluster-map epoch (rule B1). */
  3: required i64 mapEpoch,
}

/**
 * Names one call of one client, the same on every attempt of the call and never reused: a
 * store that keeps outcomes (ClusterMap.dedupWindowMs) answers a request whose token it has
 * seen with the outcome it gave first, and applies nothing (rule B8).
 */
struct RequestToken {
  /** A random number the client chose when it was made. */
  1: required i64 client,
  /** The call's number among the client's calls. */
  2: required i64 sequence,
}

/**
 * Adds delta to the key's value, read as a decimal integer (a missing key counts as 0).
 * Not idempotent: a replay adds delta twice unless the store recognises the request by its
 * token (rule B8); without a window advertised the client never replays one whose outcome
 * is unknown (rule B2).
 */
struct IncrementRequest {
  1: required binary key,
  2: required i64 delta,
  /** Set by the client for each call (zaris.dedup); a request that carries one keeps it. */
  3: optional RequestToken token,
}

struct IncrementResponse {
  1: required KvStatus status,
  /** The value after the increment, when status is Ok. */
  2: required i64 value,
  /** The key's version after the increment, when status is Ok. */
  3: required i64 version,
  /** The answering node's cluster-map epoch (rule B1). */
  4: required i64 mapEpoch,
}

/** One key of a MultiGet. */
struct GetItem {
  1: required binary key,
}

/** Reads many keys in one call; each item is answered as a Get would be. */
struct MultiGetRequest {
  1: required list<GetItem> items,
}

/** The outcome of one MultiGet item, as in GetResponse. */
struct GetOutcome {
  1: required KvStatus status,
  /** The value, set when status is Ok. */
  2: optional binary value,
  /** The key's version when status is Ok; 0 otherwise. */
  3: required i64 version,
}

struct MultiGetResponse {
  /** Ok when the items were judged one by one; InvalidRequest for a malformed batch. */
  1: required KvStatus status,
  /** One result per item, in request order. */
  2: required list<GetOutcome> results,
  /** The answering node's cluster-map epoch (rule B1). */
  3: required i64 mapEpoch,
}

/** One write of a MultiPut, with the guards of PutRequest. */
struct PutItem {
  1: required binary key,
  2: required binary value,
  /** Apply only if the key's current version equals this one; otherwise Conflict. */
  3: optional i64 ifMatchVersion,
  /** When true, apply only if the key does not exist; otherwise Conflict. */
  4: optional bool ifAbsent,
}

/** Writes many keys in one call; each item is applied as a Put would be, not atomically. */
struct MultiPutRequest {
  1: required list<PutItem> items,
}

/** The outcome of one MultiPut item, as in PutResponse. */
struct PutOutcome {
  1: required KvStatus status,
  /** The key's version after the write (Ok) or its current version (Conflict). */
  2: required i64 version,
}

struct MultiPutResponse {
  /** Ok when the items were judged one by one; InvalidRequest for a malformed batch. */
  1: required KvStatus status,
  /** One result per item, in request order. */
  2: required list<PutOutcome> results,
  /** The answering node's cluster-map epoch (rule B1). */
  3: required i64 mapEpoch,
}

/** One delete of a MultiDelete, with the guard of DeleteRequest. */
struct DeleteItem {
  1: required binary key,
  /** Delete only if the key's current version equals this one; otherwise Conflict. */
  2: optional i64 ifMatchVersion,
}

/** Deletes many keys in one call; each item is applied as a Delete would be, not atomically. */
struct MultiDeleteRequest {
  1: required list<DeleteItem> items,
}

/** The outcome of one MultiDelete item, as in DeleteResponse. */
struct DeleteOutcome {
  1: required KvStatus status,
  /** The version the key had when it was deleted (Ok) or its current version (Conflict). */
  2: required i64 version,
}

struct MultiDeleteResponse {
  /** Ok when the items were judged one by one; InvalidRequest for a malformed batch. */
  1: required KvStatus status,
  /** One result per item, in request order. */
  2: required list<DeleteOutcome> results,
  /** The answering node's cluster-map epoch (rule B1). */
  3: required i64 mapEpoch,
}

/** One storage node of the cluster. */
struct NodeInfo {
  1: required i32 id,
  2: required string host,
  3: required i32 port,
}

/** Who serves one segment of the key space. */
struct SegmentInfo {
  1: required i32 id,
  /** The node serving reads and writes; unset when the segment has no live owner. */
  2: optional i32 owner,
  /** Nodes holding a copy that every acknowledged write has reached. */
  3: required list<i32> replicas,
  /** Ownership is being handed over (failback): non-owners answer OwnershipChanging. */
  4: required bool transitioning,
  /** The segment is being copied to a new owner (scale-out or migration). */
  5: required bool migrating,
}

/**
 * The cluster map: which node owns which segment. segment(key) = CRC-32 (IEEE) of the key bytes
 * mod segmentCount. A map with a higher epoch is newer.
 */
struct ClusterMap {
  1: required i64 epoch,
  2: required i32 segmentCount,
  3: required list<NodeInfo> nodes,
  4: required list<SegmentInfo> segments,
  /**
   * The largest request, in bytes, that the answering node takes: its frame and message
   * limit. A client refuses to send a request that would not fit, rather than have the node
   * close the connection on it. Unset (a store that does not say): the client's own limit.
   */
  5: optional i64 maxMessageBytes,
  /**
   * How long, in milliseconds, the answering node's store keeps the first outcome of a
   * tokened write (RequestToken) and answers a replay with it (rule B8). Unset: the store
   * keeps none, and the client never replays a tokened write that may have been applied.
   */
  6: optional i64 dedupWindowMs,
}

/** The Zaris key-value service. Every node serves it; a node answers from its own map view. */
service ZarisKv {
  /** Reads a key. */
  GetResponse Get(1: GetRequest req)
    (zaris.kind = "read", zaris.idempotent = "true", zaris.routing = "key")

  /** Writes a key, optionally guarded by ifMatchVersion or ifAbsent. */
  PutResponse Put(1: PutRequest req)
    (zaris.kind = "write", zaris.idempotent = "true", zaris.routing = "key",
     zaris.guards = "ifMatchVersion,ifAbsent")

  /** Deletes a key, optionally guarded by ifMatchVersion. */
  DeleteResponse Delete(1: DeleteRequest req)
    (zaris.kind = "write", zaris.idempotent = "true", zaris.routing = "key",
     zaris.guards = "ifMatchVersion")

  /** Adds delta to a counter key. Not idempotent; replayed safely by its token. */
  IncrementResponse Increment(1: IncrementRequest req)
    (zaris.kind = "write", zaris.idempotent = "false", zaris.routing = "key",
     zaris.dedup = "token")

  /** Reads many keys; each item is answered as a Get. */
  MultiGetResponse MultiGet(1: MultiGetRequest req)
    (zaris.kind = "read", zaris.idempotent = "true", zaris.routing = "items[].key",
     zaris.results = "results")

  /** Writes many keys, each optionally guarded by ifMatchVersion or ifAbsent; not atomic. */
  MultiPutResponse MultiPut(1: MultiPutRequest req)
    (zaris.kind = "write", zaris.idempotent = "true", zaris.routing = "items[].key",
     zaris.results = "results", zaris.guards = "items[].ifMatchVersion,items[].ifAbsent")

  /** Deletes many keys, each optionally guarded by ifMatchVersion; not atomic. */
  MultiDeleteResponse MultiDelete(1: MultiDeleteRequest req)
    (zaris.kind = "write", zaris.idempotent = "true", zaris.routing = "items[].key",
     zaris.results = "results", zaris.guards = "items[].ifMatchVersion")

  /** Returns the answering node's current cluster map. */
  ClusterMap GetClusterMap()
    (zaris.kind = "admin")
} (zaris.map_operation = "GetClusterMap")
