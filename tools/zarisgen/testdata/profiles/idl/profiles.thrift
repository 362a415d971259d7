// Profiles: a partitioned service other than Zaris, for TestSecondService. It has its own
// namespace, status enum and classes, map operation and a string routing field, and is
// generated into a module of its own, as a team would for its service.
namespace go profiles

enum ProfileStatus {
  Found = 0,
  Absent = 1,
  WrongShard = 2,
  Overloaded = 3,
  Resharding = 4,
} (
  zaris.answer       = "Found,Absent",
  zaris.retry        = "Overloaded,Resharding",
  zaris.refresh      = "WrongShard",
  zaris.slow_backoff = "Resharding:4",
)

struct LookupRequest {
  1: required string userId,
}

struct LookupResponse {
  1: required ProfileStatus status,
  2: required i64 mapEpoch,
  3: optional string name,
}

struct SaveRequest {
  1: required string userId,
  2: required string name,
}

struct SaveResponse {
  1: required ProfileStatus status,
  2: required i64 mapEpoch,
}

struct Member {
  1: required i32 id,
  2: required string host,
  3: required i32 port,
}

struct Shard {
  1: required i32 id,
  2: optional i32 owner,
}

struct Topology {
  1: required i64 epoch,
  2: required i32 segmentCount,
  3: required list<Member> nodes,
  4: required list<Shard> segments,
}

service Profiles {
  LookupResponse Lookup(1: LookupRequest req)
    (zaris.kind = "read", zaris.idempotent = "true", zaris.routing = "userId")

  SaveResponse Save(1: SaveRequest req)
    (zaris.kind = "write", zaris.idempotent = "true", zaris.routing = "userId")

  Topology Describe() (zaris.kind = "admin")
} (zaris.map_operation = "Describe")
